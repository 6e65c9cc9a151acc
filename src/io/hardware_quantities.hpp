#pragma once
// How a hardware file states a number ({"value", "unit", "source"}), read into simulator
// units with its bounds; and the parsers of the file's sections that live apart from
// parse_hardware (hardware_loader.cpp).
#include <string>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim::hardware_file {

// The quantities of one object of a hardware file.
class Quantities {
 public:
  explicit Quantities(const ObjectReader& r) : r_(r) {}

  // `key`'s value in simulator units of `dimension` (time, bandwidth, fraction, ...): positive,
  // finite, in a unit of that dimension, with a source, and within what any GPU system has.
  double get(const std::string& key, const std::string& dimension) const;
  // A whole number up to `max`: counts size per-unit state (SMs, engines, channels), so they are bounded.
  int count(const std::string& key, int max = 1 << 20) const;
  Tick time(const std::string& key) const;
  int bytes(const std::string& key) const;

 private:
  const ObjectReader& r_;
};

// The memory-bound kernels' sections, "elementwise" and "reduction", into `hw`.
void parse_memory_bound_kernels(const ObjectReader& root, HardwareSpec& hw);

}  // namespace tpsim::hardware_file
