#pragma once
// Writing an output file named on the command line; failure is the user's input error.
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"

namespace tpsim::cli {

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError(fmt::format("{}: cannot write file", path));
  out << text;
}

}  // namespace tpsim::cli
