#pragma once
// Human-readable views of hardware files for `tpsim hardware list|show`.
#include <string>

namespace tpsim {

// One line per shipped model: name, SMs, dense bf16, HBM, topology and link bandwidth.
std::string hardware_list();
// Every parameter of one model (name or path), with unit and source, base merged in.
std::string hardware_show(const std::string& ref);

}  // namespace tpsim
