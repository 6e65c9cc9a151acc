#include "tpsim/step/weight_gradients.hpp"

#include <string>
#include <utility>
#include <vector>

#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/op_checkpoint.hpp"

namespace tpsim {

Tick layer_weight_gradients(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype) {
  const Dtype linear = t.linear_dtype == Dtype::fp8 && dtype != Dtype::fp8 ? Dtype::fp8 : dtype;
  const std::int64_t tokens = t.rank_tokens();
  std::vector<std::pair<std::string, OpPayload>> ops;
  for (const LayerLinear& l : layer_linears(t.model, t.mesh.size(MeshDim::tp)))
    ops.emplace_back(l.name + ".backward_weight", GemmOp{{l.in, l.out, tokens, linear}});
  return kernels_alone(ops, hw);
}

double weight_gradient_inputs_bytes(const TrainingStepSpec& t, double element_bytes) {
  const int tp = t.mesh.size(MeshDim::tp);
  double per_token = 0;
  for (const LayerLinear& l : layer_linears(t.model, tp)) per_token += static_cast<double>(l.out);
  return per_token * static_cast<double>(t.rank_tokens()) * element_bytes;
}

}  // namespace tpsim
