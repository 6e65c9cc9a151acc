#pragma once
// What one rank of a pipeline stage holds at its peak, by kind: the parameter shard
// with its fp32 gradient and AdamW moments (FSDP2 keeps sharded fp32 parameters and
// gradients under mixed precision), the unsharded bf16 parameters and gradients
// FSDP gathers, the activations the schedule keeps alive (peak from the simulated
// step), the output layer's logits, with context parallelism one layer's K/V buffers, and
// what the framework reserves. Parameters are this rank's after TP and EP (routed experts
// split over ep), sharded by FSDP over fsdp x cp (x ep for all but the routed experts).
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
//              FFN-norm input and output, w1 and w3 outputs, SiLU*mul output (the norm
//              outputs whole on every TP rank when PyTorch TP keeps them gathered);
//   selective: the same without the norm outputs and SiLU*mul output (recomputed);
//   full:      the layer's input only (the rest is rebuilt in backward).
// A MoE layer (`moe`) keeps, in place of the FFN's, the shared experts' and per routed token
// slot (top_k per token, on the rank that computes it) the dispatched input and the experts'
// up projections and activation output.
double activation_bytes_per_layer(const TrainingStepSpec& t, Checkpointing mode, double element_bytes, bool moe = false);

struct StageMemoryInput {
  double local_params = 0;    // this rank's parameters of the stage after TP and EP, before FSDP
  double shard_params = 0;    // its FSDP shard
  double largest_layer = 0;   // its largest layer after TP and EP (FSDP gathers one at a time)
  double edge_params = 0;     // of local_params: the embedding's and output layer's
  double peak_activations = 0;  // from the simulated schedule
  double pipeline_buffers = 0;  // PyTorch's pipelining: receive buffers per microbatch (bytes)
  bool output_input_received = false;  // the final norm's input is one of those buffers (not counted again)
  bool last_stage = false;
};

MemoryLedger stage_memory(const TrainingStepSpec& t, const StageMemoryInput& in, const HardwareSpec& hw, double element_bytes);

}  // namespace tpsim
