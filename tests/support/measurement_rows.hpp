#pragma once
// Test helpers: measurement rows from inline JSON (a file's `measurements` list, said to be
// measured on h100_sxm), and the one-line error a list is refused with.
#include <string>
#include <vector>

#include "tpsim/calibration/measurement.hpp"
#include "tpsim/io/input_error.hpp"

namespace tpsim::test {

inline std::vector<Measurement> parse(const std::string& list) {
  return parse_measurements(Json::parse(R"({"format": "tpsim-measurements", "hardware": "h100_sxm", "measurements": )" + list + "}"),
                            "test.json");
}

// "no error" when the list parses.
inline std::string error_of(const std::string& list) {
  try {
    parse(list);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace tpsim::test
