#include "tpsim/step/op_checkpoint.hpp"

#include <algorithm>
#include <map>

#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/step/group_layout.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

bool LayerLinear::reads_gathered_input() const { return input == "attention.input" || input == "ffn.input"; }

namespace {

// The FFN's linears `width` wide on one rank (the dense FFN's, or a MoE layer's shared experts').
void append_ffn(std::vector<LayerLinear>& l, const ModelShape& m, std::int64_t width) {
  if (width <= 0) return;
  const std::int64_t h = m.hidden;
  l.push_back({"ffn.w1", width, h, false, "ffn.input"});
  if (m.gated_ffn) l.push_back({"ffn.w3", width, h, false, "ffn.input"});
  l.push_back({"ffn.w2", h, width, true, "ffn.activation"});
}

bool fp8_linears(const TrainingStepSpec& t, Dtype dtype) { return t.linear_dtype == Dtype::fp8 && dtype != Dtype::fp8; }

}  // namespace

std::vector<LayerLinear> block_linears(const ModelShape& m, int tp, bool moe) {
  std::vector<LayerLinear> l;
  if (m.is_mla()) {
    // The down projections are replicated on every TP rank (whole latents, on the gathered
    // input); the up projections split by heads; wo row-parallel (strategies/layer.cpp).
    const std::int64_t h = m.hidden, heads = m.heads / tp, ql = m.mla.q_lora_rank, kvl = m.mla.kv_lora_rank;
    if (m.mla_query_latent())
      l = {{"attention.wq_a", ql, h, false, "attention.input"}, {"attention.wq_b", heads * m.head_dim, ql, false, "attention.q_latent"}};
    else
      l = {{"attention.wq", heads * m.head_dim, h, false, "attention.input"}};
    l.insert(l.end(),
        {{"attention.wkv_a", kvl + m.mla.rope_head_dim, h, false, "attention.input"},
         {"attention.wkv_b", heads * (m.head_dim - m.mla.rope_head_dim + m.v_head_dim()), kvl, false, "attention.kv_latent"},
         {"attention.wo", h, heads * m.v_head_dim(), true, "attention.output"}});
  } else {
    const std::int64_t h = m.hidden, q = m.q_width() / tp;
    // KV heads are replicated when there are fewer than TP ranks.
    const std::int64_t kv = std::max<std::int64_t>(1, m.kv_heads / tp) * m.head_dim;
    l = {{"attention.wq", q, h, false, "attention.input"},
         {"attention.wk", kv, h, false, "attention.input"},
         {"attention.wv", kv, h, false, "attention.input"},
         {"attention.wo", h, q, true, "attention.output"}};
  }
  append_ffn(l, m, (moe ? m.moe.shared_width() : m.ffn_hidden) / tp);
  return l;
}

bool op_policy_keeps(std::size_t index) { return index % 2 == 0; }

bool op_policy_reruns(const LayerLinear& l, std::size_t index, bool compiled, bool reduce_scatter_kept) {
  return !op_policy_keeps(index) && !(compiled && reduce_scatter_kept && l.row_parallel);
}

double op_checkpoint_kept_per_token(const TrainingStepSpec& t, bool moe) {
  const int tp = t.mesh.size(MeshDim::tp);
  const double h = static_cast<double>(t.model.hidden);
  const double hs = t.sequence_parallel ? h : h * tp;  // sharded over TP with sequence parallelism
  double kept = hs + static_cast<double>(t.model.o_width());  // the layer's input; the attention output
  const auto linears = block_linears(t.model, tp, moe);
  for (std::size_t i = 0; i < linears.size(); ++i)
    if (op_policy_keeps(i)) kept += static_cast<double>(linears[i].out) * tp;
  if (tp > 1 && t.sequence_parallel) kept += 2 * hs;  // reduce_scatter_tensor after wo and w2
  // all_to_all_single's outputs: every slot's whole hidden vector on every TP rank (as the
  // dispatched input is kept without checkpointing: activation_bytes_per_layer), once
  // dispatched and once combined. Without EP the routed path has no collective to keep.
  if (moe && t.mesh.size(MeshDim::ep) > 1) kept += 2 * expert_load(t).busiest_slots_per_token(t.model.moe.top_k) * h * tp;
  return kept;
}

Tick op_checkpoint_recompute(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool moe, const FusedGather& fused_gather) {
  const int tp = t.mesh.size(MeshDim::tp);
  const double e = dtype_bytes(dtype);
  const std::int64_t tokens = t.rank_tokens();
  const double rows = static_cast<double>(t.sequence_parallel ? tokens / tp : tokens);
  const double h = static_cast<double>(t.model.hidden);
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
    if (t.aten_norm()) aten(name, aten_rmsnorm_kernels(rows * h, rows, e, false));
    else pass(name, rows * h, rows * h);
  };
  norm("attention.norm");
  const double all_tokens = static_cast<double>(tokens);
  if (t.model.is_mla()) {
    // The latents' norms (replicated: every token on every rank), as the forward runs them.
    for (const auto width : {t.model.mla.q_lora_rank, t.model.mla.kv_lora_rank}) {
      if (width <= 0) continue;
      const double latent = all_tokens * static_cast<double>(width);
      if (t.aten_norm()) aten("attention.latent_norm", aten_rmsnorm_kernels(latent, all_tokens, e, false));
      else pass("attention.latent_norm", latent, latent);
    }
  }
  if (t.torchtitan_model_code()) {
    // RoPE on the recomputed K and the kept Q's output alike (both re-derived from mm
    // outputs), then repeat_kv's copies for attention's backward (its inputs; only its output
    // is kept): as the layer's forward runs them (strategies/layer.cpp). MLA rotates only the
    // rotary dims, each head's of the query and the one key part all heads share.
    const std::int64_t heads = std::max<std::int64_t>(1, t.model.heads / tp), kv_heads = std::max<std::int64_t>(1, t.model.kv_heads / tp);
    const double q = t.model.is_mla() ? static_cast<double>(heads * t.model.mla.rope_head_dim)
                                      : static_cast<double>(heads * t.model.head_dim);
    const double k = t.model.is_mla() ? static_cast<double>(t.model.mla.rope_head_dim)
                                      : static_cast<double>(kv_heads * t.model.head_dim);
    const auto rope = t.aten_elementwise ? aten_rope_kernels : compiled_rope_kernels;
    const double sequences = static_cast<double>(t.microbatch_sequences());
    aten("attention.rope.q", rope(all_tokens * q, sequences, e, false));
    aten("attention.rope.k", rope(all_tokens * k, sequences, e, false));
    if (t.model.is_mla() && t.aten_elementwise)
      aten("attention.cat", mla_cat_kernels(all_tokens, static_cast<double>(heads), static_cast<double>(t.model.head_dim),
                                            static_cast<double>(t.model.mla.rope_head_dim), static_cast<double>(t.model.v_head_dim()), e, false));
    if (kv_repeated_for_sdpa(t.torchtitan_model_code(), t.model.is_mla(), kv_heads, heads)) aten("attention.repeat_kv", repeat_kv_kernels(all_tokens * k, all_tokens * q, e, t.aten_elementwise));
  }
  const auto linears = block_linears(t.model, tp, moe);
  const bool gathers = tp > 1 && t.sequence_parallel;
  const bool fp8_gather = t.tp_fp8_all_gather && fp8;
  // The recomputed linears a fused all-gather takes (async TP): their widths per gathered input.
  std::map<std::string, std::vector<std::int64_t>> fused_outs;
  // fp8: each distinct input of a recomputed linear cast once, each weight unless FSDP
  // gathered it in fp8; the amaxes are kept, so a cast reads its tensor once (an eager
  // rowwise cast finds its rows' amaxes again: two reads).
  const double cast_reads = t.fp8.rowwise() && !t.compile ? 2 : 1;
  // Gathered in the activations' dtype for fp8 linears, the input feeds casts, not matmuls:
  // no fused all-gather (strategies/layer.cpp).
  const bool fusable_gather = fused_gather && gathers && (!fp8 || fp8_gather);
  std::string cast_input;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    const LayerLinear& l = linears[i];
    if (!op_policy_reruns(l, i, t.compile, gathers)) continue;
    const double in = static_cast<double>(l.in), out = static_cast<double>(l.out);
    if (fp8) {
      // A gathered input is cast on its shard when TP gathers it in fp8.
      const double elems = (l.reads_gathered_input() && tp > 1 && t.tp_fp8_all_gather ? rows : all_tokens) * in;
      // Compiled rowwise casts reduce along the linear's input rows (amax is not on the list).
      // Eager torchtitan code runs torchao's aten ops one by one: a tensor-wise recompute starts
      // at the kept amax's scale, a rowwise one finds its rows' amaxes again.
      const auto cast = [&](const std::string& name, double n) {
        if (t.aten_elementwise && !t.compile) {
          for (auto& [k, op] : aten_fp8_cast_kernels(n, n / in, e, t.fp8.rowwise() ? Fp8CastAxis::rows : Fp8CastAxis::tensor, t.fp8.rowwise()))
            ops.emplace_back(name + "." + k, op);
          return;
        }
        ops.emplace_back(name, t.fp8.rowwise() && t.compile ? compiled_row_cast(n, in, e, 1) : ElementwiseOp{cast_reads * n * e, n});
      };
      if (l.input != cast_input) cast("recompute." + l.name + ".cast_input", elems);
      cast_input = l.input;
      if (!t.weights_gathered_in_fp8()) cast("recompute." + l.name + ".cast_weight", out * in);
    }
    if (fusable_gather && l.reads_gathered_input()) {
      fused_outs[l.input].push_back(l.out);
      continue;
    }
    GemmProblem gemm{tokens, l.out, l.in, linear};
    gemm.scaled_mm = t.fp8.scaled_mm(linear, true);
    ops.emplace_back("recompute." + l.name, GemmOp{gemm});
  }
  if (t.compile) {
    pass("attention.residual_ffn.norm", 2 * rows * h, 2 * rows * h);
  } else {
    pass("attention.residual", 2 * rows * h, rows * h);
    norm("ffn.norm");
  }
  // The activation between the FFN's (or the shared experts') up and down projections.
  const std::int64_t width = (moe ? t.model.moe.shared_width() : t.model.ffn_hidden) / tp;
  if (width > 0) {
    const double f = static_cast<double>(width), up = t.model.ffn_up_projections();
    if (t.aten_elementwise && t.model.gated_ffn) aten("ffn.silu_mul", aten_swiglu_kernels(all_tokens * f, e, false));
    else pass(t.model.gated_ffn ? "ffn.silu_mul" : "ffn.gelu", up * all_tokens * f, all_tokens * f);
  }
  Tick time = kernels_alone(ops, hw);
  if (gathers) {
    // The all-gathers of the attention's and the FFN's input (not kept: all_gather_into_tensor
    // is not on the list), in fp8 where TP gathers fp8 inputs. Fused with the recomputed
    // linears that read it (their gathered inputs' GEMMs left out above), or NCCL's.
    const double gathered = fp8_gather ? dtype_bytes(Dtype::fp8) : e;
    const GroupLayout g = group_layout(t.mesh, MeshDim::tp, hw.fabric.gpus_per_node, 0);
    // Batch-first activations (strategies/layer.cpp): NCCL's all-gather is followed by a copy of
    // the gathered tensor into place; a fused one flattens its shard first when it holds several
    // sequences.
    std::vector<std::pair<std::string, OpPayload>> layout;
    for (const char* input : {"attention.input", "ffn.input"}) {
      const auto it = fused_outs.find(input);
      if (it != fused_outs.end()) {
        time += fused_gather(tokens, t.model.hidden, it->second, fp8_gather ? Dtype::fp8 : dtype);
        if (t.batch_first && t.microbatch_sequences() > 1) layout.emplace_back("recompute.flatten_shard", ElementwiseOp{rows * h * gathered, rows * h * gathered});
      } else {
        time += group_collective_cost(GroupOp::all_gather, all_tokens * h * gathered, g, hw).time;
        if (t.batch_first) layout.emplace_back("recompute.cat", ElementwiseOp{all_tokens * h * gathered, all_tokens * h * gathered});
      }
    }
    if (!layout.empty()) time += kernels_alone(layout, hw);
  }
  return time;
}

}  // namespace tpsim
