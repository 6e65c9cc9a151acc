#pragma once
// Writing an output file named on the command line: checked and atomic (see output_file.hpp).
#include <string>

#include "tpsim/io/output_file.hpp"

namespace tpsim::cli {

inline void write_file(const std::string& path, const std::string& text) { write_output_file(path, text); }

}  // namespace tpsim::cli
