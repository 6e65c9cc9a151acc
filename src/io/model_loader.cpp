#include "tpsim/io/model_loader.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"

namespace tpsim {

// Public architecture constants (Meta's Llama 3 model cards / params.json): hidden, FFN,
// heads, KV heads, head dim, layers, vocabulary.
const std::vector<ModelShape>& known_models() {
  static const std::vector<ModelShape> models = {
      {"llama3_8b", 4096, 14336, 32, 8, 128, 32, 128256},
      {"llama3_70b", 8192, 28672, 64, 8, 128, 80, 128256},
      {"llama3_405b", 16384, 53248, 128, 8, 128, 126, 128256},
  };
  return models;
}

ModelShape parse_model(const ObjectReader& w, bool whole_model) {
  const Json& m = w.at("model");
  const std::string path = w.child_path("model");
  if (m.is_string()) {
    const std::string name = m.get<std::string>();
    std::vector<std::string> names;
    for (const auto& k : known_models()) {
      if (k.name == name) return k;
      names.push_back(k.name);
    }
    std::string msg = fmt::format("unknown model \"{}\"", name);
    if (auto s = closest_match(name, names)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
    else msg += fmt::format(" (known: {}; or give an object with hidden, ffn_hidden, heads, kv_heads, head_dim{})", fmt::join(names, ", "),
                            whole_model ? ", layers, vocab" : "");
    fail_at(path, msg);
  }
  std::vector<std::string> keys = {"hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "ffn_activation"};
  if (whole_model) keys.insert(keys.end(), {"layers", "vocab"});
  const ObjectReader o(m, path, keys);
  ModelShape shape{"custom", bounded_dimension(o, "hidden"), bounded_dimension(o, "ffn_hidden"), bounded_dimension(o, "heads"),
                   bounded_dimension(o, "kv_heads"), bounded_dimension(o, "head_dim")};
  if (o.has("ffn_activation")) {
    const std::string act = o.string("ffn_activation");
    if (act != "swiglu" && act != "gelu")
      fail_at(o.child_path("ffn_activation"), fmt::format("unknown FFN activation \"{}\" (swiglu or gelu)", act));
    shape.gated_ffn = act == "swiglu";
  }
  if (whole_model) {
    shape.layers = bounded_dimension(o, "layers");
    if (shape.layers > kMaxLayers) fail_at(o.child_path("layers"), fmt::format("{} layers is more than the limit {}", shape.layers, kMaxLayers));
    shape.vocab = bounded_dimension(o, "vocab");
  }
  return shape;
}

}  // namespace tpsim
