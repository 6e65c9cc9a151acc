#pragma once
// A Llama-style decoder model's dimensions, optionally with mixture-of-experts FFNs.
#include <cstdint>
#include <string>

namespace tpsim {

// Routed experts replacing the FFN of some layers (Mixtral, DeepSeek-V3, Llama 4 style).
struct MoeShape {
  std::int64_t experts = 0;            // routed experts per MoE layer (0: a dense model)
  std::int64_t top_k = 0;              // experts each token is sent to
  std::int64_t expert_ffn_hidden = 0;  // each expert's FFN width (same activation as the dense FFN)
  std::int64_t shared_experts = 0;     // experts every token also goes through, each expert_ffn_hidden wide
  std::int64_t every = 1;              // every n-th layer after the dense ones is MoE (Llama 4 Maverick: 2)
  std::int64_t first_dense = 0;        // the first n layers keep a dense FFN (DeepSeek-V3: 3)
  std::int64_t shared_width() const { return shared_experts * expert_ffn_hidden; }  // the shared experts as one FFN
};

// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values are projected down
// to low-rank latents (replicated under TP), normalized, and up again per head (split by
// heads); each head's query and key carry `rope_head_dim` rotary dims of `head_dim` (the key's
// shared by every head), and its value is `v_head_dim` wide. kv_lora_rank 0: ordinary attention.
// q_lora_rank 0: the query is projected straight from the input by one wq split by heads, as
// in DeepSeek-V2-Lite (and torchtitan's DeepSeek-V3 16B flavour).
struct MlaShape {
  std::int64_t q_lora_rank = 0, kv_lora_rank = 0, rope_head_dim = 0, v_head_dim = 0;
};

// torchtitan's model code, eager or compiled, copies K and V out to every query head before
// SDPA (repeat_kv in torchtitan/models/llama/model.py, commit 9dec370 of December 2024 and
// since): SDPA, and context parallelism's ring around it, see as many K/V heads as query
// heads. Fused attention paths (Megatron-LM's, Transformer Engine's) and MLA pass K and V
// as they are.
inline bool kv_repeated_for_sdpa(bool torchtitan_model_code, bool mla, std::int64_t kv_heads, std::int64_t heads) {
  return torchtitan_model_code && !mla && kv_heads < heads;
}

struct ModelShape {
  std::string name;  // "llama3_8b", ... or "custom"
  std::int64_t hidden = 0, ffn_hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t layers = 0, vocab = 0;  // the whole model (a training step needs them; a layer workload does not)
  bool gated_ffn = true;  // SwiGLU (w1, w3, w2: Llama); false: one up-projection and GELU (GPT-3, Megatron-LM's GPT)
  MoeShape moe;
  MlaShape mla;

  int ffn_up_projections() const { return gated_ffn ? 2 : 1; }

  bool is_mla() const { return mla.kv_lora_rank > 0; }
  bool mla_query_latent() const { return is_mla() && mla.q_lora_rank > 0; }  // wq_a and wq_b; else one wq
  std::int64_t v_head_dim() const { return is_mla() ? mla.v_head_dim : head_dim; }
  std::int64_t q_width() const { return heads * head_dim; }
  std::int64_t kv_width() const { return kv_heads * head_dim; }
  // The attention output, the out projection's input: every head's value width.
  std::int64_t o_width() const { return heads * v_head_dim(); }
  // MLA's latents per token: the query's and the key/value's (with the shared rotary key).
  std::int64_t mla_latent_width() const { return is_mla() ? mla.q_lora_rank + mla.kv_lora_rank + mla.rope_head_dim : 0; }

  bool is_moe() const { return moe.experts > 0; }
  // HF Llama 4 and DeepSeek-V3 placement: after first_dense dense layers, layers every-1, 2 every-1, ...
  bool moe_layer(std::int64_t layer) const {
    return is_moe() && layer >= moe.first_dense && (layer - moe.first_dense) % moe.every == moe.every - 1;
  }
  std::int64_t moe_layers() const {
    if (!is_moe() || layers <= moe.first_dense) return 0;
    return (layers - moe.first_dense) / moe.every;
  }

  // Q, K, V, out projection and two norms (MLA: the down and up projections, the latents' norms).
  double attention_params() const {
    const double h = static_cast<double>(hidden);
    if (is_mla()) {
      const double ql = static_cast<double>(mla.q_lora_rank), kvl = static_cast<double>(mla.kv_lora_rank);
      const double nope = static_cast<double>(head_dim - mla.rope_head_dim);
      const double query = mla_query_latent() ? h * ql + ql * static_cast<double>(q_width()) : h * static_cast<double>(q_width());
      return query + h * (kvl + static_cast<double>(mla.rope_head_dim)) +
             kvl * static_cast<double>(heads) * (nope + static_cast<double>(mla.v_head_dim)) + static_cast<double>(o_width()) * h +
             2.0 * h + ql + kvl;
    }
    return h * static_cast<double>(q_width() + 2 * kv_width()) + static_cast<double>(q_width()) * h + 2.0 * h;
  }
  double ffn_params(std::int64_t width) const {
    return (ffn_up_projections() + 1.0) * static_cast<double>(hidden) * static_cast<double>(width);
  }
  // Weights of one dense decoder layer.
  double layer_params() const { return attention_params() + ffn_params(ffn_hidden); }
  // Of one MoE layer, split by who holds them: every rank's (attention, router, shared
  // experts) and the routed experts, which expert parallelism spreads.
  double moe_dense_params() const {
    return attention_params() + static_cast<double>(hidden) * static_cast<double>(moe.experts) +
           static_cast<double>(moe.shared_experts) * ffn_params(moe.expert_ffn_hidden);
  }
  double routed_expert_params() const { return static_cast<double>(moe.experts) * ffn_params(moe.expert_ffn_hidden); }
  double layer_params(std::int64_t layer) const {
    return moe_layer(layer) ? moe_dense_params() + routed_expert_params() : layer_params();
  }
  // The weights one token multiplies in a layer (its top_k experts of the routed ones).
  double active_layer_params(std::int64_t layer) const {
    return moe_layer(layer) ? moe_dense_params() + static_cast<double>(moe.top_k) * ffn_params(moe.expert_ffn_hidden) : layer_params();
  }
  // Token embedding and (untied, as in Llama 3) output projection.
  double embedding_params() const { return static_cast<double>(vocab) * static_cast<double>(hidden); }
};

}  // namespace tpsim
