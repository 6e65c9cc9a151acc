#pragma once
// What one microbatch costs per pipeline unit, from the block-level simulation of
// the TP group (every TP variant of the layer workloads): a decoder layer's forward
// and backward, the recomputation checkpointing adds, the embedding and the output
// layer with its loss, and the optimizer step over a parameter shard.
#include <string>

#include "tpsim/core/tick.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

struct LayerCosts {
  Tick forward = 0;    // one decoder layer, steady state (two layers minus one: no launch ramp)
  Tick backward = 0;   // its backward, without recomputation
  Tick recompute = 0;
  Tick forward_exposed_comm = 0, backward_exposed_comm = 0;  // TP communication no compute hid, per layer  // added to each layer's backward by activation checkpointing
  Tick embedding_forward = 0, embedding_backward = 0;
  Tick output_forward = 0, output_backward = 0;  // final norm, output projection, cross-entropy
};

// `s`: a training_step scenario; `variant`: the TP strategy of the layers.
LayerCosts simulate_layer_costs(const Scenario& s, const std::string& variant);
// AdamW over `params` local fp32 parameters: read parameter, gradient and both
// moments, write parameter and moments (28 bytes each), memory-bound.
Tick optimizer_time(const HardwareSpec& hw, double params);

}  // namespace tpsim
