#pragma once
// plan_gemm remembered per problem for one hardware model: a run launches the same few GEMM
// shapes thousands of times (every layer, every rank), and each plan tries every tile and
// split. Same plans, same order of evaluation: the run's output does not change.
#include <map>
#include <tuple>
#include <vector>

#include "tpsim/cost/gemm_cost.hpp"

namespace tpsim {

class GemmPlanner {
 public:
  explicit GemmPlanner(const HardwareSpec& hw) : hw_(hw) {}
  const GemmPlan& plan(const GemmProblem& p);

 private:
  // The problem's every field, its named plan's (tile and split) last.
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, std::int64_t, bool, std::vector<std::int64_t>, bool, bool,
                         int, int, int, int>;
  const HardwareSpec& hw_;
  std::map<Key, GemmPlan> plans_;
};

}  // namespace tpsim
