#include "tpsim/step/weight_gradients.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/op_checkpoint.hpp"
#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

Tick layer_weight_gradients(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool moe) {
  const Dtype linear = t.linear_dtype == Dtype::fp8 && dtype != Dtype::fp8 ? Dtype::fp8 : dtype;
  const int tp = t.mesh.size(MeshDim::tp);
  const std::int64_t tokens = t.rank_tokens();
  std::vector<std::pair<std::string, OpPayload>> ops;
  for (const LayerLinear& l : block_linears(t.model, tp, moe)) {
    GemmProblem gemm{l.in, l.out, tokens, linear};
    gemm.scaled_mm = t.fp8.scaled_mm(linear, false);
    ops.emplace_back(l.name + ".backward_weight", GemmOp{gemm});
    if (t.fp8.rescales_output(linear, false))
      for (auto& [suffix, op] : rowwise_output_rescale(static_cast<double>(l.in), static_cast<double>(l.out), dtype_bytes(dtype), t.compile))
        ops.emplace_back(l.name + ".backward_weight." + suffix, op);
  }
  if (moe) {
    // The router on this rank's sequence shard, and the busiest rank's experts: their weight
    // GEMMs with the column-major copies and casts torchao makes for them (expert_group_ops).
    ops.emplace_back("router.backward_weight", GemmOp{{t.model.hidden, t.model.moe.experts, std::max<std::int64_t>(1, tokens / tp), dtype}});
    for (auto& [name, op] : busiest_rank_expert_ops(t, dtype, true, 1))
      if (name.find(".backward_weight") != std::string::npos || name.find("_column") != std::string::npos) ops.emplace_back(name, op);
  }
  return kernels_alone(ops, hw);
}

double weight_gradient_inputs_bytes(const TrainingStepSpec& t, double element_bytes, bool moe) {
  const int tp = t.mesh.size(MeshDim::tp);
  double per_token = 0;
  for (const LayerLinear& l : block_linears(t.model, tp, moe)) per_token += static_cast<double>(l.out);
  double bytes = per_token * static_cast<double>(t.rank_tokens());
  if (moe) {
    // The router's scores, and per token slot the busiest rank's experts compute: the up
    // projections' and the down projection's output gradients.
    const ExpertLoad load = expert_load(t);
    const double up = static_cast<double>(t.model.ffn_up_projections() * t.model.moe.expert_ffn_hidden / tp);
    bytes += static_cast<double>(t.rank_tokens() / tp * t.model.moe.experts) + load.rank_slots(load.busiest_rank) * (up + static_cast<double>(t.model.hidden));
  }
  return bytes * element_bytes;
}

}  // namespace tpsim
