#include "tpsim/calibration/library_kernel.hpp"

#include <regex>

namespace tpsim {

std::optional<GemmProblem::NamedPlan> plan_of_lt_algorithm(const std::string& kernel) {
  static const std::regex kConfig(R"(cuBLASLt algo \d+, tile (\d{1,4})x(\d{1,4}), split-K (\d{1,4}), stages (\d{1,4})x)");
  std::smatch m;
  if (!std::regex_search(kernel, m, kConfig)) return std::nullopt;
  GemmProblem::NamedPlan plan;
  plan.tile_m = std::stoi(m[1].str());
  plan.tile_n = std::stoi(m[2].str());
  plan.split_k = std::stoi(m[3].str());
  plan.tile_k = std::stoi(m[4].str());
  if (plan.tile_m < 1 || plan.tile_n < 1 || plan.tile_k < 1 || plan.split_k < 1) return std::nullopt;
  // The cluster it ran in, where the record names one ("auto" names none).
  static const std::regex kCluster(R"(cluster (\d{1,2})x(\d{1,2})x1\b)");
  if (std::regex_search(kernel, m, kCluster)) {
    const GemmProblem::Cluster c{std::stoi(m[1].str()), std::stoi(m[2].str())};
    if (c.m >= 1 && c.n >= 1 && c.m * c.n <= kMaxClusterCtas) plan.cluster = c;
  }
  return plan;
}

}  // namespace tpsim
