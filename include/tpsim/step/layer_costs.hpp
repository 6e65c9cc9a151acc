#pragma once
// What one microbatch costs per pipeline unit, from the block-level simulation of
// the TP group (every TP variant of the layer workloads): a decoder layer's forward
// and backward, the recomputation checkpointing adds, the embedding and the output
// layer with its loss, and the optimizer step over a parameter shard.
#include <string>

#include <optional>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/step/time_by_kind.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

// A mixture-of-experts layer's costs, per microbatch (the dense layers' are LayerCosts').
struct LayerMoeCosts {
  Tick forward = 0, backward = 0, recompute = 0;
  Tick tp_forward_exposed = 0, tp_backward_exposed = 0;
  Tick ep_forward_exposed = 0, ep_backward_exposed = 0;  // the all-to-alls (nothing hides them)
  std::vector<StepCollective> collectives;               // per call
  std::vector<LayerPhase> forward_phases, backward_phases;
  PerTier forward_tp_bytes, backward_tp_bytes, recompute_tp_bytes;  // as LayerCosts'
  TimeByKind forward_kinds, backward_kinds, recompute_kinds;        // as LayerCosts'
  Tick backward_weight = 0;                                         // as LayerCosts'
};

struct LayerCosts {
  Tick forward = 0;    // one decoder layer, steady state (two layers minus one: no launch ramp), with its CP attention loop
  Tick backward = 0;   // its backward, without recomputation
  Tick recompute = 0;  // added to each layer's backward by activation checkpointing
  Tick forward_exposed_comm = 0, backward_exposed_comm = 0;  // TP communication no compute hid, per layer
  Tick cp_forward_exposed = 0, cp_backward_exposed = 0;      // CP communication no compute hid, per layer
  std::vector<StepCollective> cp_collectives;                 // per call, as the CP attention loop charges them
  std::optional<LayerMoeCosts> moe;                           // a MoE model's MoE layers
  std::vector<LayerPhase> forward_phases, backward_phases;    // communication inside a dense layer pass
  Tick embedding_forward = 0, embedding_backward = 0;
  Tick output_forward = 0, output_backward = 0;  // final norm, output projection, cross-entropy
  // The weight-gradient GEMMs inside `backward` and `output_backward` (weight_gradients.hpp):
  // zero-bubble schedules run them as passes of their own (0 under the other schedules).
  Tick backward_weight = 0, output_backward_weight = 0;
  // TP traffic one GPU sends per pass, on its node's NVLink and (a TP group across nodes) on
  // its NIC: what a pass draws from the links the other dimensions' collectives also use.
  PerTier forward_tp_bytes, backward_tp_bytes, recompute_tp_bytes;  // per decoder layer
  PerTier output_forward_tp_bytes, output_backward_tp_bytes;        // its all-gather, its reduce-scatter
  // forward, backward and recompute split by kind of work (each sums to its time).
  TimeByKind forward_kinds, backward_kinds, recompute_kinds;
};

// `s`: a training_step scenario; `variant`: the TP strategy of the layers.
LayerCosts simulate_layer_costs(const Scenario& s, const std::string& variant);

}  // namespace tpsim
