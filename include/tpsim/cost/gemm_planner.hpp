#pragma once
// plan_gemm remembered per problem for one hardware model: a run launches the same few GEMM
// shapes thousands of times (every layer, every rank), and each plan tries every tile and
// split. Same plans, same order of evaluation: the run's output does not change.
#include <map>

#include "tpsim/cost/gemm_cost.hpp"

namespace tpsim {

class GemmPlanner {
 public:
  explicit GemmPlanner(const HardwareSpec& hw) : hw_(hw) {}
  const GemmPlan& plan(const GemmProblem& p);

 private:
  const HardwareSpec& hw_;
  std::map<GemmProblem, GemmPlan> plans_;  // keyed on the whole problem, so no field is left out
};

}  // namespace tpsim
