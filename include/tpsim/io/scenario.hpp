#pragma once
// A scenario: which hardware, how many ranks, which dtype, which workload, and
// which variants (strategies) to simulate. See README for the format.
#include <cstdint>
#include <string>
#include <vector>

#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

struct Workload {
  std::string op;  // "matmul" | "allgather_matmul" | "matmul_reducescatter"
  std::int64_t m = 0, k = 0;
  std::vector<std::int64_t> n;  // one weight, or (allgather_matmul) several sharing one gather: Q, K, V
  std::int64_t n_total() const {
    std::int64_t t = 0;
    for (auto x : n) t += x;
    return t;
  }
};

struct Scenario {
  std::string name;
  std::string hardware_ref;  // as written
  HardwareSpec hardware;
  int gpus = 0;
  Dtype dtype = Dtype::bf16;
  Workload workload;
  std::vector<std::string> variants;
  Json workload_json;  // echoed into results
};

// Limits that keep a scenario physical and the simulation bounded.
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 24;
constexpr int kMaxGpus = 64;

// `base_dir`: where relative hardware paths are looked up after the working directory.
Scenario parse_scenario(const Json& j, const std::string& base_dir);
Scenario load_scenario_file(const std::string& file);

}  // namespace tpsim
