#include "tpsim/step/op_checkpoint.hpp"

#include <algorithm>

#include "tpsim/step/group_collective.hpp"
#include "tpsim/step/group_layout.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

std::vector<LayerLinear> layer_linears(const ModelShape& m, int tp) {
  const std::int64_t h = m.hidden, q = m.q_width() / tp, f = m.ffn_hidden / tp;
  // KV heads are replicated when there are fewer than TP ranks.
  const std::int64_t kv = std::max<std::int64_t>(1, m.kv_heads / tp) * m.head_dim;
  std::vector<LayerLinear> l = {{"attention.wq", q, h, false}, {"attention.wk", kv, h, false}, {"attention.wv", kv, h, false},
                                {"attention.wo", h, q, true},  {"ffn.w1", f, h, false}};
  if (m.gated_ffn) l.push_back({"ffn.w3", f, h, false});
  l.push_back({"ffn.w2", h, f, true});
  return l;
}

bool op_policy_keeps(std::size_t index) { return index % 2 == 0; }

namespace {

bool fp8_linears(const TrainingStepSpec& t, Dtype dtype) { return t.linear_dtype == Dtype::fp8 && dtype != Dtype::fp8; }

}  // namespace

double op_checkpoint_kept_per_token(const TrainingStepSpec& t) {
  const int tp = t.mesh.size(MeshDim::tp);
  const double h = static_cast<double>(t.model.hidden);
  const double hs = t.sequence_parallel ? h : h * tp;  // sharded over TP with sequence parallelism
  double kept = hs + static_cast<double>(t.model.q_width());  // the layer's input; the attention output
  const auto linears = layer_linears(t.model, tp);
  for (std::size_t i = 0; i < linears.size(); ++i)
    if (op_policy_keeps(i)) kept += static_cast<double>(linears[i].out) * tp;
  if (tp > 1 && t.sequence_parallel) kept += 2 * hs;  // reduce_scatter_tensor after wo and w2
  return kept;
}

Tick op_checkpoint_recompute(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype) {
  const int tp = t.mesh.size(MeshDim::tp);
  const double e = dtype_bytes(dtype);
  const std::int64_t tokens = t.rank_tokens();
  const double rows = static_cast<double>(t.sequence_parallel ? tokens / tp : tokens);
  const double h = static_cast<double>(t.model.hidden), f = static_cast<double>(t.model.ffn_hidden / tp);
  const bool fp8 = fp8_linears(t, dtype);
  const Dtype linear = fp8 ? Dtype::fp8 : dtype;
  std::vector<std::pair<std::string, OpPayload>> ops;
  const auto pass = [&](const std::string& name, double read, double written) {
    ops.emplace_back("recompute." + name, ElementwiseOp{read * e, written * e});
  };
  // The element-wise kernels as the layer's forward runs them (strategies/layer.cpp): the
  // attention norm on the layer's input, then the residual add and the FFN norm (one pass
  // writing both when compiled).
  const auto aten = [&](const std::string& name, const NamedKernels& ks) {
    for (const auto& [k, op] : ks) ops.emplace_back("recompute." + name + "." + k, op);
  };
  const auto norm = [&](const std::string& name) {
    if (t.aten_elementwise) aten(name, aten_rmsnorm_kernels(rows * h, rows, e, false));
    else pass(name, rows * h, rows * h);
  };
  norm("attention.norm");
  if (t.aten_elementwise) {
    // RoPE on the recomputed K and the kept Q's output alike (both re-derived from mm outputs).
    const auto heads = [&](std::int64_t n) { return static_cast<double>(tokens) * static_cast<double>(std::max<std::int64_t>(1, n / tp) * t.model.head_dim); };
    aten("attention.rope.q", aten_rope_kernels(heads(t.model.heads), e, false));
    aten("attention.rope.k", aten_rope_kernels(heads(t.model.kv_heads), e, false));
  }
  const auto linears = layer_linears(t.model, tp);
  // fp8: each distinct input of a recomputed linear cast once, each weight unless FSDP
  // gathered it in fp8; the amaxes are kept, so a cast reads its tensor once.
  std::string cast_input;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    const LayerLinear& l = linears[i];
    if (op_policy_keeps(i)) continue;
    const double in = static_cast<double>(l.in), out = static_cast<double>(l.out);
    if (fp8) {
      const std::string input = l.name.substr(0, l.name.find('.')) + (l.row_parallel ? ".row" : ".column");
      // A column-parallel input is cast on its shard when TP gathers it in fp8.
      const double elems = (!l.row_parallel && tp > 1 && t.tp_fp8_all_gather ? rows : static_cast<double>(tokens)) * in;
      if (input != cast_input) ops.emplace_back("recompute." + l.name + ".cast_input", ElementwiseOp{elems * e, elems});
      cast_input = input;
      if (!t.weights_gathered_in_fp8()) ops.emplace_back("recompute." + l.name + ".cast_weight", ElementwiseOp{out * in * e, out * in});
    }
    ops.emplace_back("recompute." + l.name, GemmOp{{tokens, l.out, l.in, linear}});
  }
  if (t.compile) {
    pass("attention.residual_ffn.norm", 2 * rows * h, 2 * rows * h);
  } else {
    pass("attention.residual", 2 * rows * h, rows * h);
    norm("ffn.norm");
  }
  const double up = t.model.ffn_up_projections();
  if (t.aten_elementwise && t.model.gated_ffn) aten("ffn.silu_mul", aten_swiglu_kernels(tokens * f, e, false));
  else pass(t.model.gated_ffn ? "ffn.silu_mul" : "ffn.gelu", up * tokens * f, tokens * f);
  Tick time = kernels_alone(ops, hw);
  if (tp > 1 && t.sequence_parallel) {
    // The all-gathers of the attention's and the FFN's input (not kept: all_gather_into_tensor
    // is not on the list), in fp8 where TP gathers fp8 inputs.
    const double gathered = t.tp_fp8_all_gather && fp8 ? dtype_bytes(Dtype::fp8) : e;
    const GroupLayout g = group_layout(t.mesh, MeshDim::tp, hw.fabric.gpus_per_node, 0);
    time += 2 * group_collective_cost(GroupOp::all_gather, static_cast<double>(tokens) * h * gathered, g, hw).time;
  }
  return time;
}

}  // namespace tpsim
