#include "tpsim/io/model_loader.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"

namespace tpsim {

// Public architecture constants: hidden, FFN (of the dense layers), heads, KV heads, head
// dim, layers, vocabulary; for MoE models experts, top_k, expert FFN, shared experts, MoE
// layer interval, leading dense layers.
//  - Llama 3: Meta's model cards / params.json.
//  - Mixtral 8x7B: arXiv 2401.04088 Table 1 (and its Hugging Face config.json).
//  - Llama 4 Scout 17B-16E and Maverick 17B-128E: their Hugging Face config.json text_config
//    (intermediate_size 8192 per expert, intermediate_size_mlp 16384 for dense layers,
//    num_local_experts, interleave_moe_layer_step 1 and 2, one shared expert per MoE layer).
//  - DeepSeek-V3 "like": its config.json (first_k_dense_replace 3, 256 routed experts of 2048,
//    top 8, one shared; MLA: 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim
//    128 + qk_rope_head_dim 64, v_head_dim 128). "Like": no multi-token-prediction module, no
//    node-limited routing or DualPipe in the model itself (scenarios choose the routing).
const std::vector<ModelShape>& known_models() {
  static const std::vector<ModelShape> models = {
      {"llama3_8b", 4096, 14336, 32, 8, 128, 32, 128256, true, {}, {}},
      {"llama3_70b", 8192, 28672, 64, 8, 128, 80, 128256, true, {}, {}},
      {"llama3_405b", 16384, 53248, 128, 8, 128, 126, 128256, true, {}, {}},
      {"mixtral_8x7b", 4096, 14336, 32, 8, 128, 32, 32000, true, {8, 2, 14336, 0, 1, 0}, {}},
      {"llama4_scout", 5120, 16384, 40, 8, 128, 48, 202048, true, {16, 1, 8192, 1, 1, 0}, {}},
      {"llama4_maverick", 5120, 16384, 40, 8, 128, 48, 202048, true, {128, 1, 8192, 1, 2, 0}, {}},
      {"deepseek_v3_like", 7168, 18432, 128, 128, 192, 61, 129280, true, {256, 8, 2048, 1, 1, 3}, {1536, 512, 64, 128}},
  };
  return models;
}

namespace {

MoeShape parse_moe(const ObjectReader& o, const ModelShape& shape) {
  MoeShape moe;
  if (!o.has("experts")) {
    for (const char* key : {"top_k", "expert_ffn_hidden", "shared_experts", "moe_every", "first_dense_layers"})
      if (o.has(key)) fail_at(o.child_path(key), "only a mixture-of-experts model (one with \"experts\") has this");
    return moe;
  }
  moe.experts = bounded_dimension(o, "experts");
  if (moe.experts > 4096) fail_at(o.child_path("experts"), fmt::format("{} experts is more than the limit 4096", moe.experts));
  moe.top_k = o.positive_int("top_k");
  if (moe.top_k > moe.experts) fail_at(o.child_path("top_k"), fmt::format("top_k {} is more than the {} experts", moe.top_k, moe.experts));
  moe.expert_ffn_hidden = bounded_dimension(o, "expert_ffn_hidden");
  moe.shared_experts = o.has("shared_experts") ? o.non_negative_int("shared_experts") : 0;
  if (moe.shared_experts > 64) fail_at(o.child_path("shared_experts"), "more than 64 shared experts");
  moe.every = o.positive_int_or("moe_every", 1);
  if (moe.every > shape.layers) fail_at(o.child_path("moe_every"), fmt::format("{} is more than the {} layers", moe.every, shape.layers));
  moe.first_dense = o.has("first_dense_layers") ? o.non_negative_int("first_dense_layers") : 0;
  if (moe.first_dense >= shape.layers)
    fail_at(o.child_path("first_dense_layers"), fmt::format("{} dense layers leave none of the {} for experts", moe.first_dense, shape.layers));
  return moe;
}

// MLA's four dimensions come together or not at all; its keys and values have every head.
MlaShape parse_mla(const ObjectReader& o, const ModelShape& shape) {
  static const char* const kKeys[] = {"q_lora_rank", "kv_lora_rank", "rope_head_dim", "v_head_dim"};
  int given = 0;
  for (const char* k : kKeys) given += o.has(k) ? 1 : 0;
  if (given == 0) return {};
  for (const char* k : kKeys)
    if (!o.has(k)) fail_at(o.child_path(k), "missing: multi-head latent attention needs q_lora_rank, kv_lora_rank, rope_head_dim and v_head_dim");
  // q_lora_rank 0: the query is projected straight from the input (DeepSeek-V2-Lite's wq).
  const std::int64_t q_lora_rank = o.non_negative_int("q_lora_rank") == 0 ? 0 : bounded_dimension(o, "q_lora_rank");
  MlaShape mla{q_lora_rank, bounded_dimension(o, "kv_lora_rank"), bounded_dimension(o, "rope_head_dim"), bounded_dimension(o, "v_head_dim")};
  if (mla.rope_head_dim >= shape.head_dim)
    fail_at(o.child_path("rope_head_dim"), fmt::format("{} rotary dims leave none of head_dim {} for the rest", mla.rope_head_dim, shape.head_dim));
  if (shape.kv_heads != shape.heads)
    fail_at(o.child_path("kv_heads"), "with multi-head latent attention every head has its own key and value: kv_heads must equal heads");
  return mla;
}

}  // namespace

ModelShape parse_model(const ObjectReader& w, bool whole_model) {
  const Json& m = w.at("model");
  const std::string path = w.child_path("model");
  if (m.is_string()) {
    const std::string name = m.get<std::string>();
    std::vector<std::string> names;
    for (const auto& k : known_models()) {
      if (k.name == name) {
        if (k.is_moe() && !whole_model)
          fail_at(path, fmt::format("{} is a mixture-of-experts model; layer workloads simulate dense layers (use a training_step)", name));
        return k;
      }
      names.push_back(k.name);
    }
    std::string msg = fmt::format("unknown model \"{}\"", name);
    if (auto s = closest_match(name, names)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
    else msg += fmt::format(" (known: {}; or give an object with hidden, ffn_hidden, heads, kv_heads, head_dim{})", fmt::join(names, ", "),
                            whole_model ? ", layers, vocab" : "");
    fail_at(path, msg);
  }
  std::vector<std::string> keys = {"hidden",   "ffn_hidden",   "heads",         "kv_heads",  "head_dim", "ffn_activation",
                                   "q_lora_rank", "kv_lora_rank", "rope_head_dim", "v_head_dim"};
  if (whole_model)
    keys.insert(keys.end(), {"layers", "vocab", "experts", "top_k", "expert_ffn_hidden", "shared_experts", "moe_every", "first_dense_layers"});
  const ObjectReader o(m, path, keys);
  ModelShape shape{"custom", bounded_dimension(o, "hidden"), bounded_dimension(o, "ffn_hidden"), bounded_dimension(o, "heads"),
                   bounded_dimension(o, "kv_heads"), bounded_dimension(o, "head_dim"), 0, 0, true, {}, {}};
  if (o.has("ffn_activation")) {
    const std::string act = o.string("ffn_activation");
    if (act != "swiglu" && act != "gelu")
      fail_at(o.child_path("ffn_activation"), fmt::format("unknown FFN activation \"{}\" (swiglu or gelu)", act));
    shape.gated_ffn = act == "swiglu";
  }
  shape.mla = parse_mla(o, shape);
  if (whole_model) {
    shape.layers = bounded_dimension(o, "layers");
    if (shape.layers > kMaxLayers) fail_at(o.child_path("layers"), fmt::format("{} layers is more than the limit {}", shape.layers, kMaxLayers));
    shape.vocab = bounded_dimension(o, "vocab");
    shape.moe = parse_moe(o, shape);
  }
  return shape;
}

}  // namespace tpsim
