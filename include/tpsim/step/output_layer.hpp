#pragma once
// The last stage's output layer per microbatch: the final norm, the vocabulary-parallel
// output projection, the cross-entropy loss and their backward, as the scenario's loss is
// configured (training_spec.hpp: cross_entropy, loss_parallel, loss_chunks).
#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

struct OutputLayerCosts {
  // With a chunked loss, `forward` holds the output projection's and the loss's backward too
  // (torchtitan runs them inside the loss call) and `backward` only the final norm's.
  Tick forward = 0, backward = 0;
  Tick backward_weight = 0;  // the weight-gradient GEMM inside `backward` (0 when it ran in `forward`)
  // TP traffic one GPU sends: the input's all-gather forward, its gradient's reduce-scatter backward.
  PerTier forward_tp_bytes, backward_tp_bytes;
};

OutputLayerCosts simulate_output_layer(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype);

}  // namespace tpsim
