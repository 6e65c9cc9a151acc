#include "tpsim/cost/gemm_planner.hpp"

namespace tpsim {

const GemmPlan& GemmPlanner::plan(const GemmProblem& p) {
  const Key key{p.m, p.n, p.k, static_cast<int>(p.dtype), p.batch, p.grouped, p.group_sizes, p.ragged_k, p.by_library,
                p.named_plan.tile_m, p.named_plan.tile_n, p.named_plan.tile_k, p.named_plan.split_k};
  auto it = plans_.find(key);
  if (it == plans_.end()) it = plans_.emplace(key, plan_gemm(p, hw_)).first;
  return it->second;
}

}  // namespace tpsim
