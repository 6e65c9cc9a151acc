#pragma once
// A Llama-style decoder model's dimensions.
#include <cstdint>
#include <string>

namespace tpsim {

struct ModelShape {
  std::string name;  // "llama3_8b", ... or "custom"
  std::int64_t hidden = 0, ffn_hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t layers = 0, vocab = 0;  // the whole model (a training step needs them; a layer workload does not)
  bool gated_ffn = true;  // SwiGLU (w1, w3, w2: Llama); false: one up-projection and GELU (GPT-3, Megatron-LM's GPT)

  int ffn_up_projections() const { return gated_ffn ? 2 : 1; }

  std::int64_t q_width() const { return heads * head_dim; }
  std::int64_t kv_width() const { return kv_heads * head_dim; }
  // Weights of one decoder layer: Q, K, V, out projection, the FFN's up projection(s) and w2, and two norms.
  double layer_params() const {
    const double h = static_cast<double>(hidden);
    return h * static_cast<double>(q_width() + 2 * kv_width()) + static_cast<double>(q_width()) * h +
           (ffn_up_projections() + 1.0) * h * static_cast<double>(ffn_hidden) + 2.0 * h;
  }
  // Token embedding and (untied, as in Llama 3) output projection.
  double embedding_params() const { return static_cast<double>(vocab) * static_cast<double>(hidden); }
};

}  // namespace tpsim
