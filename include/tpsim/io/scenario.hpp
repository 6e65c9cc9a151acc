#pragma once
// Reading scenarios (workload/scenario.hpp) from JSON, with every problem named by
// its JSON path. See README for the format.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/io/json_reader.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

// A required positive integer at `w.key`, at most kMaxDimension.
std::int64_t bounded_dimension(const ObjectReader& w, const std::string& key);

// Fails at `path` when an operand of an m x k by k x n GEMM exceeds kMaxMatrixElements.
void check_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& path, std::int64_t batch = 1);

// Hardware already loaded, by reference as written (sweeps parse many scenarios
// naming the same few files). Safe to share between threads.
class HardwareCache {
 public:
  HardwareSpec get(const std::string& ref, const std::string& base_dir);

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, HardwareSpec> loaded_;
};

// `base_dir`: where relative hardware paths are looked up after the working directory.
Scenario parse_scenario(const Json& j, const std::string& base_dir, HardwareCache* cache = nullptr);
Scenario load_scenario_file(const std::string& file);

}  // namespace tpsim
