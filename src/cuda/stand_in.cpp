#include "tpsim/cuda/stand_in.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace tpsim {

bool gpu_runs(const Op& op) {
  return !std::holds_alternative<AttentionOp>(op.payload) && !std::holds_alternative<FusedRingGemmOp>(op.payload);
}

std::string first_op_gpu_cannot_run(const Dag& dag) {
  for (OpId id = 0; id < dag.size(); ++id)
    if (!gpu_runs(dag.op(id))) return fmt::format("op \"{}\" ({})", dag.op(id).name, op_kind_name(dag.op(id)));
  return "";
}

std::map<OpId, double> stand_in_durations_us(const Dag& dag, const Timeline& simulated) {
  if (simulated.ops.size() != dag.size())
    throw std::invalid_argument(fmt::format("the simulated timeline has {} ops, the DAG {}", simulated.ops.size(), dag.size()));
  std::map<OpId, double> out;
  for (OpId id = 0; id < dag.size(); ++id) {
    if (gpu_runs(dag.op(id))) continue;
    const OpTiming& t = simulated.ops[id];
    if (!t.finished() || t.start < 0) throw std::invalid_argument(fmt::format("op \"{}\" did not run in the simulation", dag.op(id).name));
    out[id] = to_us(t.end - t.start);
  }
  return out;
}

}  // namespace tpsim
