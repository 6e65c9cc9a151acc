#pragma once
// Turns a training step into the coarse tasks of its distinct ranks (one per
// pipeline stage; the ranks of one stage are alike by the mesh's symmetry):
//  - compute: per layer and microbatch, forward and backward (+ recomputation),
//    in the order the pipeline schedule issues them, then the optimizer step;
//  - fsdp: per layer, an all-gather of its bf16 parameters before use (prefetched
//    at most one layer ahead: two layers unsharded at a time, FSDP2) — once per step
//    when a pipeline keeps them (torchtitan turns reshard_after_forward off with
//    PP), otherwise before each forward and each backward — and a reduce-scatter of
//    its gradient after its backward (the last microbatch's, with a pipeline);
//  - dp: an all-reduce of each layer's gradient (of the FSDP shard under HSDP)
//    after it is reduced (DDP: after the last microbatch's backward);
//  - pp: a send of activations after a chunk's forward, of gradients after its backward.
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/step_simulator.hpp"

namespace tpsim {

// One collective of the step as charged: per call.
struct StepCollective {
  std::string dim, op;
  double bytes = 0;  // buffer as NCCL sees it
  GroupCollectiveCost cost;
  int calls_per_stage = 0;  // on the busiest stage
};

struct StepPlan {
  StepProgram program;
  std::vector<std::vector<int>> layers_of_chunk;  // global layer ids per chunk
  std::vector<StepCollective> collectives;
  std::vector<double> stage_params;  // per pipeline rank: its layers, embedding and output layer, before TP
  int last_stage = 0;                // the rank holding the output layer
};

StepPlan plan_step(const TrainingStepSpec& t, const LayerCosts& c, const HardwareSpec& hw, Dtype dtype);

}  // namespace tpsim
