// A Llama decoder layer under tensor + sequence parallelism on G ranks, T tokens
// (without sequence parallelism, [T/G,H] is [T,H] on every rank, the all-gathers go and
// each reduce-scatter is an all-reduce: the variant's builders say how):
//   forward:  RMSNorm [T/G,H] -> all-gather -> Q,K,V -> causal flash attention (or its
//             unfused kernels: strategies/unfused_attention.hpp) ->
//             out proj -> reduce-scatter -> residual -> RMSNorm -> all-gather ->
//             w1, w3 -> SiLU*mul -> w2 -> reduce-scatter -> residual
//   backward: the transpose. A column-parallel linear (QKV, w1/w3) reduce-scatters
//             its input gradient and all-gathers its input again for the weight
//             gradient; a row-parallel one (out proj, w2) all-gathers the output
//             gradient, which feeds both its input- and weight-gradient GEMMs.
#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "layer.hpp"
#include "tpsim/strategies/eager_kernels.hpp"
#include "tpsim/strategies/flash_attention.hpp"
#include "tpsim/strategies/registry.hpp"
#include "tpsim/strategies/unfused_attention.hpp"
#include "tpsim/core/invariant.hpp"
#include "tpsim/workload/model_shape.hpp"

namespace tpsim::strategy {

namespace {

struct LayerShape {
  std::int64_t t, tr, h, f, hq, hkv, hd, s;  // tokens, per rank, hidden, ffn/G, q heads/G, kv heads/G, head dim, seq
  double e;
  std::int64_t hv;  // value (and attention output) width per head
};

class LayerBuilder {
 public:
  LayerBuilder(Dag& dag, const Scenario& sc, const VariantBuilders& v, std::string prefix, int pg)
      : dag_(dag), sc_(sc), v_(v), prefix_(std::move(prefix)), pg_(pg), ranks_(dag.process_group(pg).ranks) {
    const auto& w = sc.workload;
    const auto g = static_cast<std::int64_t>(ranks_.size());
    // Between regions a rank holds 1/G of the tokens with sequence parallelism, all without.
    sh_ = {w.tokens, w.sequence_parallel ? w.tokens / g : w.tokens, w.model.hidden, w.model.ffn_hidden / g, w.model.heads / g,
           std::max<std::int64_t>(1, w.model.kv_heads / g), w.model.head_dim, w.seq_len, double(dtype_bytes(sc.dtype)),
           w.model.v_head_dim()};
    gated_ = w.model.gated_ffn;
    mla_ = w.model.mla;
  }

  void attention_forward() {
    if (is_mla()) return mla_attention_forward();
    const auto& x = sh_;
    const std::int64_t q = x.hq * x.hd, kv = x.hkv * x.hd;
    norm("attention.norm", x.tr * x.h);
    gather("attention.qkv", x.tr * x.h, {{{x.t, q, x.h}, {x.tr, q, x.h}}, {{x.t, kv, x.h}, {x.tr, kv, x.h}}, {{x.t, kv, x.h}, {x.tr, kv, x.h}}});
    rope(false);
    attention(false);
    scatter("attention.out", x.tr * x.h, {{{x.t, x.h, q}, {x.tr, x.h, q}}});
    residual("attention.residual", x.tr * x.h);
  }

  // SwiGLU: w1 and w3 up, SiLU(w1) * w3, w2 down. GELU (gated_ffn false): w1 up, GELU, w2 down.
  void ffn_forward() {
    const auto& x = sh_;
    norm("ffn.norm", x.tr * x.h);
    if (gated_) {
      gather("ffn.w13", x.tr * x.h, {{{x.t, x.f, x.h}, {x.tr, x.f, x.h}}, {{x.t, x.f, x.h}, {x.tr, x.f, x.h}}});
      swiglu(false);
    } else {
      gather("ffn.w1", x.tr * x.h, {{{x.t, x.f, x.h}, {x.tr, x.f, x.h}}});
      local("ffn.gelu", x.t * x.f, x.t * x.f);
    }
    scatter("ffn.w2", x.tr * x.h, {{{x.t, x.h, x.f}, {x.tr, x.h, x.f}}});
    residual("ffn.residual", x.tr * x.h);
  }

  void ffn_backward() {
    const auto& x = sh_;
    gather("ffn.w2.backward", x.tr * x.h, {{{x.t, x.f, x.h}, {x.tr, x.f, x.h}}, {{x.f, x.h, x.t}, {x.f, x.h, x.tr}}}, Role::output_gradient);
    if (gated_) {
      swiglu(true);
      input_grad_sums("ffn.w13.backward_input", 1);  // w1's and w3's
      scatter("ffn.w13.backward_input", x.tr * x.h, {{{x.t, x.h, 2 * x.f}, {x.tr, x.h, 2 * x.f}}}, Role::input_gradient, 2);
      weight_gradient("ffn.w13.backward_weight", x.tr * x.h, {{{x.h, x.f, x.t}, {x.h, x.f, x.tr}}, {{x.h, x.f, x.t}, {x.h, x.f, x.tr}}});
    } else {
      local("ffn.gelu.backward", 2 * x.t * x.f, x.t * x.f);
      scatter("ffn.w1.backward_input", x.tr * x.h, {{{x.t, x.h, x.f}, {x.tr, x.h, x.f}}}, Role::input_gradient);
      weight_gradient("ffn.w1.backward_weight", x.tr * x.h, {{{x.h, x.f, x.t}, {x.h, x.f, x.tr}}});
    }
    norm_backward("ffn.norm.backward", x.tr * x.h);
  }

  void attention_backward() {
    if (is_mla()) return mla_attention_backward();
    const auto& x = sh_;
    const std::int64_t q = x.hq * x.hd, kv = x.hkv * x.hd;
    gather("attention.out.backward", x.tr * x.h, {{{x.t, q, x.h}, {x.tr, q, x.h}}, {{q, x.h, x.t}, {q, x.h, x.tr}}}, Role::output_gradient);
    attention(true);
    rope(true);
    input_grad_sums("attention.qkv.backward_input", 2);  // wq's, wk's and wv's
    scatter("attention.qkv.backward_input", x.tr * x.h, {{{x.t, x.h, q + 2 * kv}, {x.tr, x.h, q + 2 * kv}}}, Role::input_gradient, 3);
    weight_gradient("attention.qkv.backward_weight", x.tr * x.h,
           {{{x.h, q, x.t}, {x.h, q, x.tr}}, {{x.h, kv, x.t}, {x.h, kv, x.tr}}, {{x.h, kv, x.t}, {x.h, kv, x.tr}}});
    norm_backward("attention.norm.backward", x.tr * x.h);
  }

 private:
  // Multi-head latent attention, as DeepSeek-V3's inference/model.py lays it out under TP:
  // the down projections (wq_a, wkv_a) replicated on every rank's gathered input, their
  // latents normalized, the up projections (wq_b, wkv_b) split by heads, wo row-parallel;
  // without a query latent (q_lora_rank 0) one wq, split by heads, makes the query.
  // Every GEMM that reads the gathered input or a latent runs row by row, so the region's
  // decomposition still applies to it.
  // MLA's widths on this rank: the query and key-value latents (the latter with the shared
  // rotary key), the per-head queries, up-projected keys-and-values and attention output.
  struct MlaWidths {
    std::int64_t ql, kvl, kva, q, kv_up, o;
  };
  MlaWidths mla_widths() const {
    const auto& x = sh_;
    return {mla_.q_lora_rank, mla_.kv_lora_rank, mla_.kv_lora_rank + mla_.rope_head_dim, x.hq * x.hd,
            x.hq * (x.hd - mla_.rope_head_dim + x.hv), x.hq * x.hv};
  }
  void mla_attention_forward() {
    const auto& x = sh_;
    const auto [ql, kvl, kva, q, kv_up, o] = mla_widths();
    norm("attention.norm", x.tr * x.h);
    // The query: down and up again (wq_a, wq_b), or one wq without a query latent.
    std::vector<RegionGemm> gemms = ql > 0 ? std::vector<RegionGemm>{{{x.t, ql, x.h}, {x.tr, ql, x.h}}, {{x.t, q, ql}, {x.tr, q, ql}, false}}
                                           : std::vector<RegionGemm>{{{x.t, q, x.h}, {x.tr, q, x.h}}};
    gemms.push_back({{x.t, kva, x.h}, {x.tr, kva, x.h}});
    gemms.push_back({{x.t, kv_up, kvl}, {x.tr, kv_up, kvl}, false});
    gather("attention.qkv", x.tr * x.h, std::move(gemms));
    latent_norms(false);
    rope(false);
    mla_eager_cats(false);
    attention(false);
    scatter("attention.out", x.tr * x.h, {{{x.t, x.h, o}, {x.tr, x.h, o}}});
    residual("attention.residual", x.tr * x.h);
  }
  void mla_attention_backward() {
    const auto& x = sh_;
    const auto [ql, kvl, kva, q, kv_up, o] = mla_widths();
    gather("attention.out.backward", x.tr * x.h, {{{x.t, o, x.h}, {x.tr, o, x.h}}, {{o, x.h, x.t}, {o, x.h, x.tr}}}, Role::output_gradient);
    attention(true);
    mla_eager_cats(true);
    rope(true);
    latent_norms(true);
    // Input gradients: through the up projections to this rank's share of the latents'
    // gradients, then through the replicated down projections; the partial sums are
    // reduce-scattered like any row-parallel output.
    // In order: the query's up projection (or its one wq, split by heads like the up
    // projections), the key-value up projection, the query's and the key-value down projections.
    std::vector<RegionGemm> input, weight;
    input.push_back(ql > 0 ? RegionGemm{{x.t, ql, q}, {x.tr, ql, q}} : RegionGemm{{x.t, x.h, q}, {x.tr, x.h, q}});
    weight.push_back(ql > 0 ? RegionGemm{{ql, q, x.t}, {ql, q, x.tr}} : RegionGemm{{x.h, q, x.t}, {x.h, q, x.tr}});
    input.push_back({{x.t, kvl, kv_up}, {x.tr, kvl, kv_up}});
    weight.push_back({{kvl, kv_up, x.t}, {kvl, kv_up, x.tr}});
    if (ql > 0) {
      input.push_back({{x.t, x.h, ql}, {x.tr, x.h, ql}});
      weight.push_back({{x.h, ql, x.t}, {x.h, ql, x.tr}});
    }
    input.push_back({{x.t, x.h, kva}, {x.tr, x.h, kva}});
    weight.push_back({{x.h, kva, x.t}, {x.h, kva, x.tr}});
    input_grad_sums("attention.qkv.backward_input", static_cast<int>(input.size()) - 1);
    scatter("attention.qkv.backward_input", x.tr * x.h, std::move(input), Role::input_gradient);
    weight_gradient("attention.qkv.backward_weight", x.tr * x.h, std::move(weight));
    // The replicated down projections' (and latent norms') gradients are partial on each TP
    // rank: summed over the group, as sequence-parallel norm weights are.
    if (ranks_.size() > 1) {
      const int group = dag_.new_group(pg_);
      const double bytes = static_cast<double>(x.h * (ql + kva) + ql + kvl) * sh_.e;
      for (int r : ranks_) dag_.add(r, kCompute, prefix_ + "attention.latent_weights.grad_all_reduce", CollectiveOp{CollectiveKind::all_reduce, bytes, group});
    }
    norm_backward("attention.norm.backward", x.tr * x.h);
  }

  // MLA's query and key-value latents normalized (q_norm, kv_norm), replicated on every TP
  // rank: eager op by op as the block's norms, or one pass each.
  void latent_norms(bool backward) {
    const auto [ql, kvl, kva, q, kv_up, o] = mla_widths();
    const std::int64_t elems = sh_.t * (ql + kvl);
    const std::string name = backward ? "attention.latent_norms.backward" : "attention.latent_norms";
    if (sc_.workload.aten_norm()) {
      // Each latent is its own norm: rows of ql, then of kvl elements.
      for (const auto& [latent, width] : {std::pair<const char*, std::int64_t>{"q", ql}, {"kv", kvl}})
        if (width > 0) kernels(name + "." + latent, aten_rmsnorm_kernels(double(sh_.t * width), double(sh_.t), sh_.e, backward));
      return;
    }
    if (backward) local(name, 2 * elems, elems);
    else local(name, elems, elems);
  }

  // Eager MLA's torch.cat of each head's query and key parts (eager_kernels.hpp).
  void mla_eager_cats(bool backward) {
    if (!sc_.workload.aten_elementwise) return;
    kernels(backward ? "attention.cat.backward" : "attention.cat",
            mla_cat_kernels(double(sh_.t), double(sh_.hq), double(sh_.hd), double(mla_.rope_head_dim), double(sh_.hv), sh_.e, backward));
  }

  // What a region's GEMMs compute, which says which of them take a weight as their [n, k]
  // operand and, under rowwise scaling, along which axis each operand is cast:
  //   forward          x @ W^T, a weight in every GEMM;
  //   input_gradient   dy @ W (a column-parallel input gradient), a weight in every GEMM;
  //   output_gradient  a row-parallel linear's gathered dy feeding its input gradient (the
  //                    first GEMM, on the weight) and its weight gradient (x^T @ dy);
  //   weight_gradient  x^T @ dy, no weight.
  enum class Role { forward, input_gradient, output_gradient, weight_gradient };

  // With fp8 linears and torchao's float8 TP (Float8ColwiseParallel, Float8RowwiseParallel,
  // PrepareFloat8ModuleInput: float8/float8_tensor_parallel.py) the gathered operand, the
  // input forward and the output gradient backward, is cast on its shard before the
  // all-gather, with a tensor-wide scale: its amax is all-reduced over the TP group first.
  void gather(const std::string& name, std::int64_t shard_elems, std::vector<RegionGemm> gemms, Role role = Role::forward) {
    const bool fp8 = gathers_in_linear_dtype();
    cast_operands(name, gemms, role, fp8 ? static_cast<double>(shard_elems) : -1, fp8);
    Region region = make_region(name, static_cast<double>(shard_elems) * gathered_element_bytes(), std::move(gemms), role);
    region.copy_into_place = dtensor_layout();  // read by NCCL's builder only
    if (!pattern_matched()) {
      fused_op_layout_copy(region.name + ".flatten_shard", region.bytes);
      return v_.gather(dag_, region);
    }
    // Gathered in the activations' dtype for narrower linears, the tensor feeds the casts, not
    // the matmuls, which is not the pattern the pass fuses: the all-gather stays NCCL's.
    if (casts_gathered_input()) return gather_baseline(dag_, region);
    // The micro-pipeline pass fuses an all-gather with the matmuls that take the gathered
    // tensor as their left operand (_find_consumer_matmuls); a weight gradient takes it
    // transposed, as its contraction, and MLA's up projections take a latent: they run whole
    // after the fused op (on the gathered tensor it returns). With no such matmul the
    // all-gather stays NCCL's.
    std::vector<RegionGemm> after;
    std::erase_if(region.gemms, [&](const RegionGemm& g) {
      const bool unfused = g.shard.m == g.whole.m || !g.reads_gathered;
      if (unfused) after.push_back(g);
      return unfused;
    });
    if (region.gemms.empty()) {
      region.gemms = std::move(after);
      return gather_baseline(dag_, region);
    }
    fused_op_layout_copy(region.name + ".flatten_shard", region.bytes);
    v_.gather(dag_, region);
    if (after.empty()) return;
    // What the fused op returns is its gathered buffer viewed back into [b, s, h] order: to
    // feed a weight gradient's GEMM as [b * s, h] rows it is copied (reshape).
    if (std::ranges::any_of(after, [](const RegionGemm& g) { return g.reads_gathered; }))
      fused_op_layout_copy(region.name + ".reshape_gathered", static_cast<double>(ranks_.size()) * region.bytes);
    Region unfused = make_region(name + ".unfused", 0, std::move(after), role);
    gather_replicated(dag_, unfused);
  }
  // A column-parallel linear's weight gradient: on its input gathered again (Megatron-LM's
  // sequence parallelism), or on the gathered input autograd kept from forward (PyTorch TP).
  void weight_gradient(const std::string& name, std::int64_t shard_elems, std::vector<RegionGemm> gemms) {
    if (!sc_.workload.tp_saves_gathered_input) return gather(name, shard_elems, std::move(gemms), Role::weight_gradient);
    cast_operands(name, gemms, Role::weight_gradient);
    // The input kept is the one the forward's fused all-gather returned: a strided view when
    // its shards held several sequences, which the weight gradient's GEMM reads reshaped.
    fused_op_layout_copy(prefix_ + name + ".reshape_gathered",
                         static_cast<double>(shard_elems) * gathered_element_bytes() * static_cast<double>(ranks_.size()));
    gather_replicated(dag_, make_region(name, 0, std::move(gemms), Role::weight_gradient));
  }
  // `matmuls`: how many matmuls' products the reduce-scatter sums (a column-parallel input
  // gradient over linears sharing their input: wq, wk, wv; w1, w3), where the region's GEMMs
  // stand for them as one.
  void scatter(const std::string& name, std::int64_t chunk_elems, std::vector<RegionGemm> gemms, Role role = Role::forward,
               int matmuls = 0) {
    cast_operands(name, gemms, role);
    if (matmuls == 0) matmuls = static_cast<int>(gemms.size());
    Region region = make_region(name, static_cast<double>(chunk_elems) * sh_.e, std::move(gemms), role);
    region.reduction = sc_.software.symm_mem_reduction;
    region.copy_into_place = dtensor_layout();  // read by NCCL's builder only
    // The micro-pipeline pass fuses a reduce-scatter only with the one matmul that produces
    // its input (_find_producer_matmul); a sum of matmuls' products stays NCCL's.
    if (pattern_matched() && matmuls > 1) return scatter_baseline(dag_, region);
    // The fused op moves the scattered dimension to the front of the matmul's input and
    // flattens it into rows (_fused_matmul_reduce_scatter_impl).
    const GemmShape& a = region.gemms.front().whole;
    fused_op_layout_copy(region.name + ".flatten_input", static_cast<double>(a.m) * static_cast<double>(a.k) * dtype_bytes(linear_dtype()));
    v_.scatter(dag_, region);
  }
  // torchtitan's activations are [b, s, h], and sequence parallelism shards s (DTensor's
  // Shard(1)); Megatron-LM's are [s, b, h], sharded along their first dimension.
  // PyTorch's functional collectives gather and scatter along the first dimension, so with
  // batch-first activations every NCCL all-gather and reduce-scatter of the layer copies its
  // tensor into place (Region::copy_into_place; since pytorch/pytorch PR 169404, Dec 2025, an
  // all-gather of one sequence is a view instead, which is not modelled).
  bool dtensor_layout() const { return sc_.workload.batch_first && v_.functional_collectives && ranks_.size() > 1; }
  // PyTorch's fused async-TP ops move the sharded dimension to the front
  // (_fused_all_gather_matmul_impl: A_shard.movedim(gather_dim, 0).flatten(0, -2)): a view
  // while the shard holds one sequence, a copy of `bytes` when it holds several. Only
  // variants that run the fused ops (micro_pipeline) have them.
  void fused_op_layout_copy(const std::string& name, double bytes) {
    if (!v_.micro_pipeline || !dtensor_layout() || sh_.t <= sh_.s) return;
    for (int r : ranks_) dag_.add(r, kCompute, name, layout_copy(bytes));
  }
  // torch.compile's micro-pipeline TP pass (torch/_inductor/fx_passes/micro_pipeline_tp.py)
  // decides which of the layer's collectives PyTorch's async TP decomposes.
  bool pattern_matched() const { return v_.micro_pipeline && !sc_.software.async_tp_every_region; }
  void local(const std::string& name, std::int64_t read_elems, std::int64_t write_elems) {
    for (int r : ranks_)
      dag_.add(r, kCompute, prefix_ + name, ElementwiseOp{read_elems * sh_.e, write_elems * sh_.e});
  }
  Dtype linear_dtype() const { return sc_.workload.linear_dtype.value_or(sc_.dtype); }
  bool gathers_in_linear_dtype() const {
    return sc_.workload.tp_gathers_in_linear_dtype && linear_dtype() != sc_.dtype && sc_.workload.sequence_parallel && ranks_.size() > 1;
  }
  // Bytes per element of what an all-gather moves (and what it leaves gathered).
  double gathered_element_bytes() const { return gathers_in_linear_dtype() ? dtype_bytes(linear_dtype()) : sh_.e; }
  // Linears in a narrower dtype than the activations (fp8 training, torchao dynamic
  // scaling): each GEMM operand is scaled by its absolute maximum and cast before the
  // GEMM. Tensorwise: the shared input once, each weight (or gradient) once, but no weight that FSDP's
  // fp8 all-gather already cast. A tensor-wise cast reads the bf16 tensor twice: once for
  // its amax, once to cast it, since every element's cast needs the whole tensor's maximum.
  // Eager code is charged both in one kernel here; compiled code runs Inductor's three kernels
  // (an amax reduction, a tiny one for the scale, the cast: fp8_casts/ in the measurements),
  // charged as the amax pass and the cast (the tiny one, 1-2 us, not). The reduce-scatters stay in the activation
  // dtype. A weight gradient's operands are charged a cast without its amax (torchao casts
  // them again, in the layout the GEMM takes: a pass of its own).
  // `shared_elems`: the shared operand's elements where it is cast before it is gathered
  // (its shard); otherwise (< 0) the whole GEMM's. `amax_over_tp`: the amax is all-reduced
  // over the TP group before the cast (a shard cast for an fp8 all-gather, whose scale must be
  // the gathered tensor's). Rowwise: rowwise_casts.
  void cast_operands(const std::string& name, const std::vector<RegionGemm>& gemms, Role role, double shared_elems = -1,
                     bool amax_over_tp = false) {
    if (linear_dtype() == sc_.dtype || gemms.empty()) return;
    const auto amax_all_reduce = [&] {
      if (!amax_over_tp) return;
      const int group = dag_.new_group(pg_);
      for (int r : ranks_) dag_.add(r, kCompute, prefix_ + name + ".amax_all_reduce", CollectiveOp{CollectiveKind::all_reduce, 4, group});
    };
    if (sc_.workload.fp8.rowwise()) {
      amax_all_reduce();
      return rowwise_casts(name, gemms, role);
    }
    // `fresh`: the elements whose amax this cast finds. A weight gradient's operands (the
    // output gradient, the layer's input) were cast for the input gradient or the forward
    // already: compiled code (AOTAutograd's CSE over the joint graph) knows their amaxes and
    // only casts them again into the layout the GEMM takes.
    const double shared = shared_elems >= 0 ? shared_elems : static_cast<double>(gemms.front().whole.m) * static_cast<double>(gemms.front().whole.k);
    double elems = shared, fresh = role == Role::weight_gradient ? 0 : shared;
    for (std::size_t i = 0; i < gemms.size(); ++i) {
      const bool weight = role == Role::forward || role == Role::input_gradient || (role == Role::output_gradient && i == 0);
      if (weight && sc_.workload.weights_in_linear_dtype) continue;
      const double operand = static_cast<double>(gemms[i].whole.n) * static_cast<double>(gemms[i].whole.k);
      elems += operand;
      if (weight) fresh += operand;
    }
    if (sc_.workload.aten_elementwise && !sc_.workload.compile) {
      // Eager torchtitan code: torchao's aten ops one by one, the amax found again for every
      // operand (no CSE outside a compiled graph); the kernels from the scale on are the cast
      // without its amax, so what precedes them is the amax's.
      const NamedKernels all = aten_fp8_cast_kernels(elems, 1, sh_.e, Fp8CastAxis::tensor);
      const NamedKernels from_scale = aten_fp8_cast_kernels(elems, 1, sh_.e, Fp8CastAxis::tensor, false);
      kernels(name + ".cast", NamedKernels(all.begin(), all.end() - static_cast<std::ptrdiff_t>(from_scale.size())));
      amax_all_reduce();
      return kernels(name + ".cast", from_scale);
    }
    const ElementwiseOp cast{elems * sh_.e, elems * dtype_bytes(linear_dtype())};
    if (!sc_.workload.compile) {
      amax_all_reduce();
      for (int r : ranks_) dag_.add(r, kCompute, prefix_ + name + ".cast", ElementwiseOp{2 * cast.bytes_read, cast.bytes_written});
      return;
    }
    if (fresh > 0)
      for (int r : ranks_) dag_.add(r, kCompute, prefix_ + name + ".cast.amax", ElementwiseOp{fresh * sh_.e, 4});  // writes a few bytes of maxima
    amax_all_reduce();
    for (int r : ranks_) dag_.add(r, kCompute, prefix_ + name + ".cast", cast);
  }
  // Rowwise scaling (torchao float8_linear.py, matmul_with_hp_or_float8_args, axiswise casts):
  // every GEMM casts its operands anew along its own contraction: forward x and W along their
  // rows (k); backward dy along its rows for the input gradient and W along its columns; for
  // the weight gradient dy and the bf16 input along their columns (the tokens). A cast along a
  // tensor's rows finds each row's amax and scales it in one kernel when compiled (two eager;
  // compiled_row_cast: Inductor's looped reduction reads wide rows twice, bound per SM);
  // one along its columns reduces across rows first, so it reads the tensor twice, and eager
  // code then copies the fp8 result into the layout _scaled_mm takes (torchao's
  // .t().contiguous().t()), which compiled code writes directly. Linears reading one input
  // (wq, wk, wv; w1, w3) share its casts, as the tensorwise count does.
  void rowwise_casts(const std::string& name, const std::vector<RegionGemm>& gemms, Role role) {
    const auto mk = [](const RegionGemm& g) { return static_cast<double>(g.whole.m) * static_cast<double>(g.whole.k); };
    const auto nk = [](const RegionGemm& g) { return static_cast<double>(g.whole.n) * static_cast<double>(g.whole.k); };
    double rows = 0, columns = 0;  // elements cast along rows, along columns
    switch (role) {
      case Role::forward:
        rows = mk(gemms.front());
        for (const RegionGemm& g : gemms) rows += nk(g);
        break;
      case Role::input_gradient:
        rows = mk(gemms.front());
        for (const RegionGemm& g : gemms) columns += nk(g);
        break;
      case Role::output_gradient:  // dy for the input gradient, the weight; then x and dy for the weight gradient
        rows = mk(gemms.front());
        columns = nk(gemms.front());
        for (std::size_t i = 1; i < gemms.size(); ++i) columns += mk(gemms[i]) + nk(gemms[i]);
        break;
      case Role::weight_gradient:
        columns = mk(gemms.front());
        for (const RegionGemm& g : gemms) columns += nk(g);
        break;
    }
    const double e = sh_.e, f = dtype_bytes(linear_dtype());
    // Every tensor cast along its rows here has the GEMM's contraction as its row.
    const double contraction = static_cast<double>(gemms.front().whole.k);
    if (sc_.workload.aten_elementwise && !sc_.workload.compile) {
      // Eager torchtitan code: torchao's aten ops one by one (the scale vectors sized by the
      // first GEMM's contraction).
      if (rows > 0) kernels(name + ".cast_rows", aten_fp8_cast_kernels(rows, rows / contraction, e, Fp8CastAxis::rows));
      if (columns > 0) kernels(name + ".cast_columns", aten_fp8_cast_kernels(columns, contraction, e, Fp8CastAxis::columns));
      return;
    }
    const ElementwiseOp row_cast = sc_.workload.compile ? compiled_row_cast(rows, contraction, e, f) : ElementwiseOp{2 * rows * e, rows * f};
    for (int r : ranks_) {
      if (rows > 0) dag_.add(r, kCompute, prefix_ + name + ".cast_rows", row_cast);
      if (columns <= 0) continue;
      dag_.add(r, kCompute, prefix_ + name + ".cast_columns", ElementwiseOp{2 * columns * e, columns * f});
      if (!sc_.workload.compile) dag_.add(r, kCompute, prefix_ + name + ".fp8_layout", ElementwiseOp{columns * f, columns * f});
    }
  }
  // A region of this layer's TP group on its linears' dtype and kernels.
  Region make_region(const std::string& name, double bytes, std::vector<RegionGemm> gemms, Role role) const {
    Region r{prefix_ + name, pg_, linear_dtype(), bytes, std::move(gemms)};
    r.scaled_mm = sc_.workload.fp8.scaled_mm(linear_dtype(), role == Role::forward);
    r.rescale_output = sc_.workload.fp8.rescales_output(linear_dtype(), role == Role::forward);
    r.rescale_compiled = sc_.workload.compile;
    r.output_bytes = sh_.e;
    return r;
  }
  // fp8 linears whose input TP gathers in the activations' dtype: casts read the gathered tensor.
  bool casts_gathered_input() const { return linear_dtype() != sc_.dtype && !gathers_in_linear_dtype(); }
  // compile fuses each residual add with the norm after it (one pass writing both);
  // without it the norm reads the residual's output again.
  void norm(const std::string& name, std::int64_t elems) {
    if (sc_.workload.aten_norm()) return kernels(name, aten_rmsnorm_kernels(double(elems), double(sh_.tr), sh_.e, false));
    if (!sc_.workload.compile) local(name, elems, elems);
  }
  // Linears that read one input (wq, wk, wv; w1, w3) each give autograd a gradient of it, which
  // eager PyTorch sums pairwise as they come: `sums` adds of the gathered [T, h] partials
  // before their reduce-scatter (charged with the region's one fused GEMM; compiled code
  // folds them in).
  void input_grad_sums(const std::string& name, int sums) {
    if (!sc_.workload.aten_elementwise) return;
    for (int i = 0; i < sums; ++i) local(fmt::format("{}.sum{}", name, i), 2 * sh_.t * sh_.h, sh_.t * sh_.h);
  }
  // Eager autograd then adds the norm path's input gradient to the residual path's: a kernel
  // of its own (compiled and fused kernels fold it in).
  void norm_backward(const std::string& name, std::int64_t elems) {
    if (sc_.workload.aten_norm()) kernels(name, aten_rmsnorm_kernels(double(elems), double(sh_.tr), sh_.e, true));
    else local(name, 3 * elems, elems);
    if (sc_.workload.aten_elementwise) local(name + ".add_residual_grad", 2 * elems, elems);
  }
  // Rotary embeddings on Q and K as torchtitan's apply_rotary_emb runs them: eager PyTorch's
  // kernels, or under torch.compile generated casts around ATen's complex product (a fused
  // kernel's one pass over Q and K, without either, is left out as before).
  void rope(bool backward) {
    const bool aten = sc_.workload.aten_elementwise;
    if (!aten && !sc_.workload.compile) return;
    const std::string name = backward ? "attention.rope.backward" : "attention.rope";
    // MLA rotates only the rotary dims: each head's of the query, the one key part all heads share.
    const bool mla = is_mla();
    const double q = double(sh_.hq) * double(mla ? mla_.rope_head_dim : sh_.hd);
    const double k = mla ? double(mla_.rope_head_dim) : double(sh_.hkv * sh_.hd);
    const auto kernels_for = aten ? aten_rope_kernels : compiled_rope_kernels;
    const double sequences = double(sh_.t) / double(sh_.s);
    kernels(name + ".q", kernels_for(double(sh_.t) * q, sequences, sh_.e, backward));
    kernels(name + ".k", kernels_for(double(sh_.t) * k, sequences, sh_.e, backward));
  }
  // torchtitan's repeat_kv (eager or compiled model code) with fewer KV heads than query
  // heads: K and V copied out to every query head before attention; backward sums each
  // copy's gradient back over its repeats (ATen's reduce kernel, or a generated one).
  void repeat_kv(bool backward) {
    const bool aten = sc_.workload.aten_elementwise;
    if (!kv_repeated_for_sdpa(sc_.workload.torchtitan_model_code(), is_mla(), sh_.hkv, sh_.hq)) return;
    const double kv = double(sh_.t) * double(sh_.hkv * sh_.hd), q = double(sh_.t) * double(sh_.hq * sh_.hd);
    if (!backward) return kernels("attention.repeat_kv", repeat_kv_kernels(kv, q, sh_.e, aten));
    for (const char* which : {"k", "v"})
      for (int r : ranks_) {
        const std::string name = prefix_ + "attention.repeat_kv.backward." + which;
        if (aten) dag_.add(r, kCompute, name, ReduceOp{static_cast<int>(sh_.hq / sh_.hkv), kv * sh_.e, ReductionKernel::aten_sum});
        else dag_.add(r, kCompute, name, ElementwiseOp{q * sh_.e, kv * sh_.e});
      }
  }
  void swiglu(bool backward) {
    const double n = double(sh_.t) * double(sh_.f);
    if (sc_.workload.aten_elementwise) return kernels(backward ? "ffn.silu_mul.backward" : "ffn.silu_mul", aten_swiglu_kernels(n, sh_.e, backward));
    if (backward) local("ffn.silu_mul.backward", 3 * sh_.t * sh_.f, 2 * sh_.t * sh_.f);
    else local("ffn.silu_mul", 2 * sh_.t * sh_.f, sh_.t * sh_.f);
  }
  void kernels(const std::string& name, const NamedKernels& ks) {
    for (int r : ranks_)
      for (const auto& [k, op] : ks) dag_.add(r, kCompute, prefix_ + name + "." + k, op);
  }
  void residual(const std::string& name, std::int64_t elems) { local(name, 2 * elems, (sc_.workload.compile ? 2 : 1) * elems); }
  void attention(bool backward) {
    const AttentionChoice& how = sc_.workload.attention;
    const AttentionOp a{sh_.t, sh_.s, sh_.hq, sh_.hkv, sh_.hd, true, backward, sc_.dtype, attention_kernel_of(how.impl), sh_.hv};
    const bool flash = how.impl != AttentionImpl::unfused;  // unfused attention repeats K and V itself
    const auto ks = flash ? flash_attention_kernels(a, backward ? "attention.core.backward" : "attention.core")
                          : unfused_attention_kernels(a, how.dropout);
    if (flash && !backward) repeat_kv(false);
    for (int r : ranks_)
      for (const auto& [name, op] : ks) dag_.add(r, kCompute, prefix_ + name, op);
    if (flash && backward) repeat_kv(true);
  }

  Dag& dag_;
  const Scenario& sc_;
  VariantBuilders v_;
  std::string prefix_;
  int pg_;                  // the TP group
  std::vector<int> ranks_;  // its GPUs
  LayerShape sh_{};
  bool gated_ = true;
  MlaShape mla_{};  // all zero for ordinary attention
  bool is_mla() const { return mla_.kv_lora_rank > 0; }
};

}  // namespace

// An upper estimate of the layers' op count: a decomposed region has a few ops per rank and step.
double layer_op_estimate(const Scenario& s) {
  const auto& w = s.workload;
  const bool fwd = w.pass != Pass::backward, bwd = w.pass != Pass::forward;
  const double regions = (fwd ? 4.0 : 0.0) + (bwd ? 6.0 : 0.0);
  // + local kernels (unfused attention's 16; eager aten norms, RoPE, repeat_kv and SwiGLU
  // about 70 more; compiled RoPE and repeat_kv 16)
  return static_cast<double>(s.gpus) * w.layers *
         (regions * (8.0 * s.gpus + 16) + 24 + (w.aten_elementwise ? 76 : 0) + (w.compile ? 16 : 0));
}

void build_layers(Dag& dag, const Scenario& s, const VariantBuilders& variant, int pg) {
  const auto& w = s.workload;
  const bool attn = w.op != "ffn", ffn = w.op != "attention";
  const bool fwd = w.pass != Pass::backward, bwd = w.pass != Pass::forward;
  const auto prefix = [&](int l) { return w.layers > 1 ? fmt::format("layer{}.", l) : std::string(); };
  tpsim::check_layer_op_budget(s);  // refuse before allocating
  dag.reserve(static_cast<std::size_t>(layer_op_estimate(s)));
  if (fwd)
    for (int l = 0; l < w.layers; ++l) {
      LayerBuilder b(dag, s, variant, prefix(l), pg);
      if (attn) b.attention_forward();
      if (ffn) b.ffn_forward();
    }
  if (bwd)
    for (int l = w.layers - 1; l >= 0; --l) {
      LayerBuilder b(dag, s, variant, prefix(l), pg);
      if (ffn) b.ffn_backward();
      if (attn) b.attention_backward();
    }
}

}  // namespace tpsim::strategy

namespace tpsim {

void check_layer_op_budget(const Scenario& s) {
  const double estimate = strategy::layer_op_estimate(s);
  if (estimate > static_cast<double>(Dag::kMaxOps))
    throw SimulationLimit(fmt::format("the op graph would have about {:.0f} ops, more than {}: simulate fewer layers or GPUs",
                                      estimate, Dag::kMaxOps));
}

}  // namespace tpsim
