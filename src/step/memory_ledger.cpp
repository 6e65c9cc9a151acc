#include "tpsim/step/memory_ledger.hpp"

#include <algorithm>

namespace tpsim {

double MemoryLedger::total() const {
  double t = 0;
  for (const auto& [kind, b] : parts) t += b;
  return t;
}

double activation_bytes_per_layer(const TrainingStepSpec& t, Checkpointing mode, double element_bytes) {
  const auto& m = t.model;
  const double tp = t.mesh.size(MeshDim::tp);
  const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_width()), f = static_cast<double>(m.ffn_hidden);
  // KV heads are replicated when there are fewer than TP ranks.
  const double kv = static_cast<double>(m.kv_width()) * std::max(1.0, tp / static_cast<double>(m.kv_heads)) ;
  const double tokens = static_cast<double>(t.microbatch_tokens());
  const double up = m.ffn_up_projections();
  double per_token = 0;  // elements on one TP rank, times tp
  switch (mode) {
    case Checkpointing::none: per_token = 4 * h + q + 2 * kv + q + (up + 1) * f; break;  // up projections and the activation's output
    case Checkpointing::selective: per_token = 2 * h + q + 2 * kv + q + up * f; break;
    case Checkpointing::full: per_token = h; break;
  }
  return tokens * per_token / tp * element_bytes;
}

MemoryLedger stage_memory(const TrainingStepSpec& t, const StageMemoryInput& in, const HardwareSpec& hw, double e) {
  const double tp = t.mesh.size(MeshDim::tp), fsdp = t.mesh.size(MeshDim::fsdp);
  const bool pp = t.mesh.size(MeshDim::pp) > 1;
  const double local = in.params / tp;  // this rank's share before FSDP sharding
  const double shard = local / fsdp;
  const double grad_bytes = dtype_bytes(t.grad_reduce_dtype);
  const double layer = t.model.layer_params();  // every decoder layer has the same weights
  MemoryLedger l;
  l.parts.emplace_back("parameters (fp32 shard)", 4 * shard);
  l.parts.emplace_back("gradients (fp32 shard)", 4 * shard);
  l.parts.emplace_back("optimizer state (AdamW moments)", 8 * shard);
  if (fsdp > 1) {
    // With a pipeline, torchtitan keeps gathered parameters from forward to backward
    // (reshard_after_forward is off); otherwise two layers are gathered at a time
    // (the one running and the one prefetched).
    const double gathered = pp ? local : 2 * layer / tp;
    l.parts.emplace_back("FSDP gathered parameters (bf16)", e * gathered);
    l.parts.emplace_back("FSDP unsharded gradients", grad_bytes * 2 * layer / tp);
  }
  double act = in.peak_activations;
  // Full checkpointing rebuilds one layer's activations at a time inside backward.
  if (t.checkpoint == Checkpointing::full) act += activation_bytes_per_layer(t, Checkpointing::none, e);
  l.parts.emplace_back("activations", act);
  l.peak_activations = act;
  if (in.last_stage) {
    // bf16 logits and their fp32 softmax for this rank's vocabulary shard.
    const double v = static_cast<double>((t.model.vocab + t.mesh.size(MeshDim::tp) - 1) / t.mesh.size(MeshDim::tp));
    l.parts.emplace_back("logits and loss", static_cast<double>(t.microbatch_tokens()) * v * (e + 4));
  }
  l.parts.emplace_back("framework reserved", hw.memory.framework_reserved_bytes);
  return l;
}

}  // namespace tpsim
