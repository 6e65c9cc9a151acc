#pragma once
// The routed experts of one MoE layer on one rank, per microbatch, as token-choice MoE
// runs them (Megatron-LM's all-to-all token dispatcher; torchtitan's MoE): the router
// scores the TP group's tokens (gathered by sequence parallelism), every token goes to its
// top_k experts, one all-to-all over the ep group sends each token to the rank holding its
// expert (experts / ep per rank), the rank runs its experts as grouped GEMMs (each expert's
// FFN sharded over tp like the dense FFN: Megatron's default expert tensor parallelism),
// a second all-to-all brings the outputs back, and they are summed by the router's weights.
// Backward runs the same path in reverse with twice the GEMM work. The all-to-alls block:
// the experts need their tokens and the next op needs the outputs (nothing overlaps them).
// Load: uniform by default; `expert_load_skew` gives the busiest expert (1 + skew) times the
// mean, and the rank holding it sets the pace (every rank waits for its outputs).
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

struct ExpertLoad {
  double mean = 0;        // token slots per expert, over the whole ep group
  double busiest = 0;     // the busiest expert's
  double others = 0;      // each other expert's, when the busiest takes its share
  double rank_slots = 0;  // token slots the busiest expert's rank computes
  double sent_slots = 0;  // token slots each rank sends (its tokens x top_k)
};
ExpertLoad expert_load(const TrainingStepSpec& t);

struct MoeLayerCost {
  Tick forward = 0, backward = 0;  // the routed block, per microbatch
  Tick forward_all_to_all = 0, backward_all_to_all = 0;  // the part of them all-to-alls take (exposed)
  Tick forward_tp = 0, backward_tp = 0;                  // the TP gather and reduce-scatter it adds (no shared experts)
  double dispatch_bytes = 0;                             // one all-to-all's buffer on the busiest rank
  std::vector<StepCollective> collectives;
  std::vector<LayerPhase> forward_phases, backward_phases;  // its all-to-alls (and TP collectives), from its start
};

// `tp_collectives`: whether the routed block gathers its input and reduce-scatters its output
// over the TP group itself (a model without shared experts; otherwise their FFN does it).
MoeLayerCost simulate_moe_layer(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool tp_collectives);

}  // namespace tpsim
