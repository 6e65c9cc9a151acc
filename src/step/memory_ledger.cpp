#include "tpsim/step/memory_ledger.hpp"

#include <algorithm>

#include "tpsim/step/context_parallel.hpp"
#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/op_checkpoint.hpp"
#include "tpsim/strategies/unfused_attention.hpp"

namespace tpsim {

double MemoryLedger::total() const {
  double t = 0;
  for (const auto& [kind, b] : parts) t += b;
  return t;
}

double activation_bytes_per_layer(const TrainingStepSpec& t, Checkpointing mode, double element_bytes, bool moe) {
  const auto& m = t.model;
  const double tp = t.mesh.size(MeshDim::tp);
  const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_width()), f = static_cast<double>(m.ffn_hidden);
  // KV heads are replicated when there are fewer than TP ranks.
  const double kv = static_cast<double>(m.kv_width()) * std::max(1.0, tp / static_cast<double>(m.kv_heads)) ;
  const double tokens = static_cast<double>(t.rank_tokens());
  const double up = m.ffn_up_projections();
  double ffn_kept = up * f, ffn_recomputed = f;  // up projections kept; the activation's output recomputed by selective
  if (moe) {
    const auto& x = m.moe;
    const double shared = static_cast<double>(x.shared_width()), ef = static_cast<double>(x.expert_ffn_hidden);
    // Per token, top_k routed slots (more on the rank whose experts routing favours: its
    // memory is the stage's peak): the dispatched input (every TP rank holds each slot's
    // whole hidden vector, hence x tp before the / tp below) and the expert FFN's outputs.
    const double k = expert_load(t).busiest_slots_per_token(x.top_k);
    // The expert outputs back from the combine, which the multiply by the routing scores keeps
    // for the scores' gradient: top_k whole hidden vectors per token of this rank (every TP
    // rank holds them), in fp32 where eager PyTorch up-casts before the multiply (torchtitan
    // b5bcd76 token_dispatcher.py combine: routed_output.to(float32) * scores); compiled, the
    // cast is recomputed from the kept activation-dtype outputs.
    const double combined = static_cast<double>(x.top_k) * h * tp * (t.aten_elementwise ? 4.0 / element_bytes : 1.0);
    ffn_kept = up * shared + k * (h * tp + up * ef) + combined;
    ffn_recomputed = shared + k * ef;
  }
  // The hidden-sized activations (norm and residual inputs, a checkpointed layer input) are
  // sharded over TP with sequence parallelism and whole on every TP rank without it
  // (Korthikanti et al. 2022: 34sbh/t with, sbh(10 + 24/t) without).
  const double hs = t.sequence_parallel ? h : h * tp;
  // The norm outputs the QKV and w1/w3 GEMMs read: kept sharded and gathered again in
  // backward (Megatron-LM), or kept as gathered, whole on every TP rank (PyTorch TP).
  const double norm_out = t.tp_saves_gathered_input ? h * tp : hs;
  double per_token = 0;  // elements on one TP rank, times tp
  const bool unfused = t.attention.impl == AttentionImpl::unfused;
  // Q, K, V and the attention output; MLA's K and V are every head's, its V and output
  // v_head_dim wide, and its latents (replicated over TP) are kept for the up projections.
  const double attention = m.is_mla() ? q + static_cast<double>(m.heads * (m.head_dim + m.v_head_dim())) +
                                            static_cast<double>(m.o_width()) + static_cast<double>(m.mla_latent_width()) * tp
                                      : q + 2 * kv + q;
  const double everything = 2 * hs + 2 * norm_out + attention + ffn_kept + ffn_recomputed;
  switch (mode) {
    case Checkpointing::none: per_token = everything; break;
    // Unfused attention: Megatron-LM's selective recomputation drops the attention core's
    // [s, s] tensors and keeps the rest (Korthikanti et al. 2022); flash attention has none,
    // so selective drops the norm outputs and the FFN activation instead.
    case Checkpointing::selective: per_token = unfused ? everything : everything - 2 * norm_out - ffn_recomputed; break;
    case Checkpointing::selective_op: per_token = op_checkpoint_kept_per_token(t, moe); break;
    case Checkpointing::full: per_token = hs; break;
  }
  double bytes = tokens * per_token / tp * element_bytes;
  if (unfused && mode == Checkpointing::none) {
    // Every TP rank holds all of the microbatch's sequences for its heads/tp heads.
    const double scores = tokens * static_cast<double>(t.seq_len / t.mesh.size(MeshDim::cp)) * static_cast<double>(m.heads) / tp;
    bytes += unfused_attention_saved_bytes(scores, element_bytes, t.attention.dropout);
  }
  return bytes;
}

MemoryLedger stage_memory(const TrainingStepSpec& t, const StageMemoryInput& in, const HardwareSpec& hw, double e) {
  const double fsdp = t.shard_ranks();
  const bool pp = t.mesh.size(MeshDim::pp) > 1;
  const double local = in.local_params, shard = in.shard_params;
  const double grad_bytes = dtype_bytes(t.grad_reduce_dtype);
  MemoryLedger l;
  l.parts.emplace_back("parameters (fp32 shard)", 4 * shard);
  l.parts.emplace_back("gradients (fp32 shard)", 4 * shard);
  l.parts.emplace_back("optimizer state (AdamW moments)", 8 * shard);
  if (fsdp > 1) {
    // With a pipeline, torchtitan keeps gathered parameters from forward to backward
    // (reshard_after_forward is off); otherwise two layers are gathered at a time
    // (the one running and the one prefetched).
    // Under FSDP2's fp8 all-gather the decoder layers' (all-linear) weights are gathered in
    // fp8; the embedding and output layer stay in the parameter dtype.
    const bool fp8 = t.weights_gathered_in_fp8();
    const double w = fp8 ? dtype_bytes(Dtype::fp8) : e;
    const double gathered = pp ? w * (local - in.edge_params) + e * in.edge_params : w * 2 * in.largest_layer;
    l.parts.emplace_back(fp8 ? "FSDP gathered parameters (fp8 layers)" : "FSDP gathered parameters (bf16)", gathered);
    // With a pipeline, gradient sync waits for the last microbatch's backward
    // (torch.distributed.pipelining stage.py backward_maybe_with_nosync:
    // set_requires_gradient_sync(False) before it), and FSDP2 keeps every unsharded gradient
    // meanwhile, up-cast to the reduce dtype (_fsdp_param.py to_accumulated_grad_if_needed):
    // the whole stage's. Otherwise two layers' at a time.
    l.parts.emplace_back("FSDP unsharded gradients", grad_bytes * (pp ? local : 2 * in.largest_layer));
  }
  double act = in.peak_activations;
  // Full checkpointing rebuilds one layer's activations at a time inside backward; the
  // per-op policy rebuilds what it did not keep.
  if (t.checkpoint == Checkpointing::full) act += activation_bytes_per_layer(t, Checkpointing::none, e, t.model.is_moe());
  if (t.checkpoint == Checkpointing::selective_op)
    act += std::max(0.0, activation_bytes_per_layer(t, Checkpointing::none, e, t.model.is_moe()) -
                             activation_bytes_per_layer(t, Checkpointing::selective_op, e, t.model.is_moe()));
  l.parts.emplace_back("activations", act);
  l.peak_activations = act;
  if (in.pipeline_buffers > 0) l.parts.emplace_back("pipeline receive buffers", in.pipeline_buffers);
  if (in.last_stage) {
    // bf16 logits and their fp32 softmax for this rank's vocabulary shard; with aten's
    // cross entropy, at the start of backward: log_softmax's kept output, nll_loss's dense
    // gradient and log_softmax's gradient, fp32 each (the bf16 logits are dropped by then).
    // Under loss_parallel the fused backward's (grad_input + exp(x)) * grad_output holds
    // four: the kept output, grad_input, exp(x) and their sum.
    // Compiled, the logits and their gradient, in their dtype, and nothing per logit besides
    // (the forward saves a value per token).
    const double per_logit = t.cross_entropy == CrossEntropy::in_place ? e + 4
                             : t.cross_entropy == CrossEntropy::compiled ? 2 * e
                             : t.loss_parallel_decomposed()              ? 16
                                                                         : 12;
    const double tp = t.mesh.size(MeshDim::tp);
    const double h = static_cast<double>(t.model.hidden), tokens = static_cast<double>(t.rank_tokens());
    const double chunk_logits = tokens / t.loss_chunks * static_cast<double>(t.loss_vocab()) * per_logit;
    if (t.loss_chunks == 1) {
      l.parts.emplace_back("logits and loss", chunk_logits);
    } else {
      // ChunkedLossWrapper: one chunk's logits at a time, while GradAccumulator's fp32
      // [tokens, hidden] buffer fills; after the loop its cast to the activation dtype,
      // kept for the decoder's backward, takes the logits' place.
      l.parts.emplace_back("logits and loss (one chunk)", std::max(chunk_logits, tokens * h * e));
      l.parts.emplace_back("chunked loss's input-gradient buffer (fp32)", tokens * h * 4);
    }
    // Kept until the output layer's backward, outside any checkpointed layer: the final
    // norm's input (this rank's sequence shard) and the output GEMM's input (gathered over TP
    // with sequence parallelism where PyTorch keeps the gathered input).
    // (An output layer alone in its pipeline chunk receives the final norm's input into a
    // receive buffer, counted with those.)
    const double shard_rows = t.sequence_parallel ? tokens / tp : tokens;
    const double gemm_rows = t.tp_saves_gathered_input ? tokens : shard_rows;
    l.parts.emplace_back("final norm and output layer inputs", ((in.output_input_received ? 0 : shard_rows) + gemm_rows) * h * e);
  }
  const int cp = t.mesh.size(MeshDim::cp);
  if (cp > 1) {
    // One layer's attention at a time: allgather holds every rank's K/V block; a ring the
    // block it computes on and the one arriving. Backward adds the fp32 dK/dV accumulators
    // and the copy of them in flight.
    const double kv = cp_kv_block_bytes(t, e);
    const double blocks = t.cp_method == CpMethod::allgather ? cp : 2;
    const double f32_kv = kv * 4 / e;
    l.parts.emplace_back("context-parallel K/V buffers", blocks * kv + 2 * f32_kv);
  }
  l.parts.emplace_back("framework reserved", hw.memory.framework_reserved_bytes);
  return l;
}

}  // namespace tpsim
