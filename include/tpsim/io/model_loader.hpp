#pragma once
// Models by name (Llama 3 presets) or as an object of dimensions.
#include <string>
#include <vector>

#include "tpsim/io/json_reader.hpp"
#include "tpsim/workload/model_shape.hpp"

namespace tpsim {

const std::vector<ModelShape>& known_models();
// `w.at("model")`: a preset name or an object. `whole_model`: the object must also give
// "layers" and "vocab" (a training step); otherwise they are not allowed.
ModelShape parse_model(const ObjectReader& w, bool whole_model);

}  // namespace tpsim
