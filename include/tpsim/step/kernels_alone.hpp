#pragma once
// Kernels back to back on one GPU's stream, nothing else running: the time the step layer
// charges for a layer's pieces that run outside the TP group's block-level simulation
// (CP's attention blocks and merges, a MoE layer's router and experts).
#include <string>
#include <utility>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/dag/op.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

Tick kernels_alone(const std::vector<std::pair<std::string, OpPayload>>& ops, const HardwareSpec& hw);

}  // namespace tpsim
