#include "tpsim/cost/gemm_planner.hpp"

namespace tpsim {

const GemmPlan& GemmPlanner::plan(const GemmProblem& p) {
  auto it = plans_.find(p);
  if (it == plans_.end()) it = plans_.emplace(p, plan_gemm(p, hw_)).first;
  return it->second;
}

}  // namespace tpsim
