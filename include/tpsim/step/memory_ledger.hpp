#pragma once
// What one rank of a pipeline stage holds at its peak, by kind: the parameter shard
// with its fp32 gradient and AdamW moments (FSDP2 keeps sharded fp32 parameters and
// gradients under mixed precision), the unsharded bf16 parameters and gradients
// FSDP gathers, the activations the schedule keeps alive (peak from the simulated
// step), the output layer's logits, and what the framework reserves.
#include <string>
#include <vector>

#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

struct MemoryLedger {
  std::vector<std::pair<std::string, double>> parts;  // (kind, bytes), in a fixed order
  double total() const;
  double peak_activations = 0;
};

// Activation bytes one decoder layer keeps per microbatch on one TP rank until its
// backward (bf16 with sequence parallelism; flash attention keeps no score matrix):
//   none:      attention-norm input and output, Q, K, V, attention output, residual,
//              FFN-norm input and output, w1 and w3 outputs, SiLU*mul output;
//   selective: the same without the norm outputs and SiLU*mul output (recomputed);
//   full:      the layer's input only (the rest is rebuilt in backward).
double activation_bytes_per_layer(const TrainingStepSpec& t, Checkpointing mode, double element_bytes);

struct StageMemoryInput {
  double params = 0;         // parameters of this stage (all its layers, embedding or output layer), before TP
  double peak_activations = 0;  // from the simulated schedule
  bool last_stage = false;
};

MemoryLedger stage_memory(const TrainingStepSpec& t, const StageMemoryInput& in, const HardwareSpec& hw, double element_bytes);

}  // namespace tpsim
