#pragma once
// Turns a training step into the coarse tasks of its distinct ranks (one per
// pipeline stage; the ranks of one stage are alike by the mesh's symmetry):
//  - compute: per layer and microbatch, forward and backward (+ recomputation),
//    in the order the pipeline schedule issues them, then the optimizer step;
//  - fsdp (over fsdp x cp ranks: CP ranks share weights, torchtitan's dp_shard_cp mesh):
//    per layer, an all-gather of its bf16 parameters before use (prefetched
//    at most one layer ahead: two layers unsharded at a time, FSDP2) — once per step
//    when a pipeline keeps them (torchtitan turns reshard_after_forward off with
//    PP), otherwise before each forward and each backward — and a reduce-scatter of
//    its gradient after its backward (the last microbatch's, with a pipeline); FSDP2's
//    copies on the compute stream (copy-out of each gathered layer into its parameters,
//    chunk_cat of its gradients before each reduce-scatter) lengthen those passes, and the
//    cast and copy-in of the local shard precede each all-gather on its stream;
//  - dp: an all-reduce of each layer's gradient (of the FSDP shard under HSDP)
//    after it is reduced (DDP: after the last microbatch's backward);
//  - pp: a send of activations after a chunk's forward, of gradients after its backward;
//  - cp: inside each layer's attention (layer_costs), listed with the rest.
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/step_simulator.hpp"

namespace tpsim {

struct StageParams {
  double local = 0;          // on one of its ranks after TP and EP (before FSDP sharding)
  double shard = 0;          // that rank's FSDP shard (what the optimizer steps)
  double largest_layer = 0;  // its largest layer on one rank after TP and EP (what FSDP gathers)
  double edge = 0, edge_shard = 0;  // of `local` and `shard`: the embedding's and output layer's
  // PyTorch's pipelining: the receive buffers its stages hold for every microbatch (bytes).
  double pipeline_buffers = 0;
  bool output_input_received = false;  // the output layer alone in its chunk: the final norm's input is such a buffer
};

struct LayerPasses {
  double forward = 0, backward = 0;  // layer passes over all stages
  double weight_halves = 0;          // of the backwards, those whose weight half ran apart (zero bubble)
};

struct StepPlan {
  StepProgram program;
  std::vector<std::vector<int>> layers_of_chunk;  // global layer ids per chunk
  std::vector<StepCollective> collectives;
  std::vector<StageParams> stages;  // per pipeline rank
  LayerPasses dense_passes, moe_passes;
  // The communication inside a layer pass, by kind: dense forward, dense backward (with its
  // recomputation first), MoE forward, MoE backward.
  std::vector<std::vector<LayerPhase>> phase_templates;
  int last_stage = 0;  // the rank holding the output layer
};

StepPlan plan_step(const TrainingStepSpec& t, const LayerCosts& c, const HardwareSpec& hw, Dtype dtype);

}  // namespace tpsim
