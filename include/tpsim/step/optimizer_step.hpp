#pragma once
// The step's end on one rank: torchtitan's clip_grad_norm_ (foreach: the gradients' norms,
// then each gradient scaled) and AdamW over the rank's fp32 parameter shard, each a
// memory-bound pass over the shard in PyTorch's multi_tensor_apply launches.
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

// The passes of AdamW and the clipping before it: bytes read and written per parameter.
struct OptimizerPass {
  const char* name;
  double read, written;
};
std::vector<OptimizerPass> optimizer_passes(OptimizerImpl impl);

// `params` local fp32 parameters (fp32 gradients and moments).
Tick optimizer_step_time(const HardwareSpec& hw, double params, OptimizerImpl impl);

}  // namespace tpsim
