#pragma once
// Context parallelism inside one layer's attention, as PyTorch's context_parallel runs it
// (pytorch/pytorch torch/distributed/tensor/experimental/_attention.py:
// _templated_ring_attention and _templated_ring_attention_backward, _ContextParallelOptions
// defaults: load balance on, fp32 merges and gradient accumulators, ALL_GATHER rotation).
// Each rank holds two of 2 x cp chunks of every sequence (i and 2cp-1-i), so each of the
// cp block steps computes half of a (2 chunks x 2 chunks) block: the local causal block
// first, then the other ranks' K/V. Forward: the K/V rotation is issued before each step's
// flash attention, which waits for the previous rotation; the partial outputs are merged
// (fp32, log-sum-exp). Backward: K/V rotate the same way, and each step's dK/dV
// accumulators travel one rank on (fp32, neighbour exchange) while the next block runs.
// `allgather` gathers all K/V once, overlapping the first block; `ring` passes one block
// per step. All CP traffic of a rank runs on its process group's one NCCL stream, in issue
// order. The loop is simulated on one rank (the mesh is symmetric) with the step
// simulator, so the overlap of transfers and blocks, and the SMs the NCCL kernels hold,
// come out of the simulation.
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/cost/attention_cost.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

struct CpAttentionCost {
  Tick loop = 0;           // the whole block loop of one layer pass
  Tick first_block = 0;    // its first (local, causal) block alone: what the TP layer simulation already runs
  Tick compute_alone = 0;  // the loop's kernels back to back, nothing in flight
  std::vector<StepCollective> collectives;  // one entry per kind, priced per call
  int transfers = 0;                        // CP collectives per pass
  std::vector<LayerPhase> phases;           // its transfers, from the loop's start
  Tick extra() const { return loop > first_block ? loop - first_block : 0; }
  Tick exposed() const { return loop > compute_alone ? loop - compute_alone : 0; }
};

// One layer's attention under context parallelism; {} when cp is 1.
CpAttentionCost simulate_cp_attention(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool backward);

// One step of the loop on one rank: its queries (both chunks) against one block of keys,
// causal-shaped (half of the full block's work, whatever the step).
AttentionProblem cp_block_problem(const TrainingStepSpec& t, Dtype dtype, bool backward);

// K and V bytes one rank holds for one block of its TP heads (KV heads replicated below tp),
// as SDPA is handed them: repeated to every query head by torchtitan's model code.
double cp_kv_block_bytes(const TrainingStepSpec& t, double element_bytes);

}  // namespace tpsim
