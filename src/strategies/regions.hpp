#pragma once
// Internal to strategies/: a TP region is where a collective meets GEMMs.
//  - A gather region all-gathers one sharded tensor (each rank holds `shard_bytes`)
//    and feeds it to one or more GEMMs (Q, K and V; or a weight gradient).
//  - A scatter region computes partial outputs with GEMMs and reduce-scatters
//    them by rows (each rank ends with `chunk_bytes`).
//  - An all-reduce region computes partial outputs with GEMMs and sums them on
//    every rank (tensor parallelism without sequence parallelism: each rank ends
//    with the whole output, `bytes`).
//  - An all-to-all region sends each rank's rows (`bytes` in all) evenly to every
//    rank of the group, multiplies what arrived by the rank's own weight (an expert),
//    and sends the products back where their rows came from.
// Every GEMM is given twice: whole (what the baseline runs after / before the
// collective) and per shard (what a decomposition runs on one rank's piece).
// A variant is a pair of builders that append a region's ops for every rank of its
// process group, leaving each rank's work joined back on the compute stream. Builders
// index the group's members 0..G-1 (shard numbers, ring neighbours) and place ops on
// their global ranks.
#include <string>
#include <vector>

#include "tpsim/dag/dag.hpp"

namespace tpsim::strategy {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

struct RegionGemm {
  GemmShape whole;
  GemmShape shard;
  // In a gather region, whether its left operand is the gathered tensor itself (false: a
  // latent computed from it, as MLA's up projections read), which is what a compiler's
  // fusion of the all-gather with its consumers matches.
  bool reads_gathered = true;
};

struct Region {
  std::string name;   // e.g. "attention.qkv"
  int pg = Dag::kWorld;  // the DAG's process group that runs it (the TP group), in ring order
  Dtype dtype = Dtype::bf16;
  double bytes = 0;   // gather: one rank's shard of the input; scatter: one rank's chunk of the output;
                      // all-reduce: the whole output every rank sums; all-to-all: one rank's input rows
  std::vector<RegionGemm> gemms;
  ReductionKernel reduction = ReductionKernel::aten_sum;  // what a decomposed reduce-scatter ends with
  // PyTorch's functional collectives on a tensor sharded along its second dimension
  // (torch/distributed/_functional_collectives.py, all_gather_tensor and
  // reduce_scatter_tensor with gather_dim / scatter_dim 1): NCCL gathers the shards one
  // after another along the first, so chunk + cat copies the gathered tensor into place after
  // an all-gather, and the input into rank order before a reduce-scatter.
  bool copy_into_place = false;
  // One rank of a group of this size on a one-GPU DAG (Workload::emulated_group): the
  // decomposition's steps, every peer this GPU, its pulls local copies. 0: the DAG's group.
  int emulated_group = 0;
  // How its fp8 GEMMs run torch._scaled_mm.
  GemmProblem::ScaledMm scaled_mm{};
  // Each GEMM's output rescaled after it (torchao's rowwise GEMMs without fast accumulation:
  // rowwise_output_rescale), in the activations' dtype of `output_bytes`, by generated code or eager.
  bool rescale_output = false;
  bool rescale_compiled = true;
  double output_bytes = 2;
  GemmProblem problem(const GemmShape& g) const {
    GemmProblem p{g.m, g.n, g.k, dtype};
    p.scaled_mm = scaled_mm;
    return p;
  }
};

using RegionBuilder = void (*)(Dag&, const Region&);

struct VariantBuilders {
  RegionBuilder gather;
  RegionBuilder scatter;     // nullptr: the variant has no reduce-scatter form
  RegionBuilder all_reduce;  // nullptr: the variant has no all-reduce form
  RegionBuilder all_to_all;  // nullptr: the variant has no all-to-all form
  // The decomposition torch.compile's micro-pipeline TP pass puts in a model's graph
  // (PyTorch's symmetric-memory async TP): in a layer it applies only where the pass's
  // patterns match (strategies/layer.cpp), unless the scenario asks for every region.
  bool micro_pipeline = false;
  // Whether its NCCL collectives are PyTorch's functional collectives (the baseline as DTensor
  // TP runs it; async TP where the pass leaves a collective to NCCL), which lay a tensor
  // sharded along another dimension than its first out themselves (Region::copy_into_place).
  bool functional_collectives = false;
};

// The compute and communication streams every builder uses.
constexpr int kCompute = 0;
constexpr int kComm = 1;

inline int wrap(int r, int g) { return ((r % g) + g) % g; }

// A copy of `bytes` that only lays a tensor out for the next op.
inline ElementwiseOp layout_copy(double bytes) {
  ElementwiseOp op{bytes, bytes};
  op.layout_copy = true;
  return op;
}

// Appends the region's GEMMs (whole or per-shard) on one rank and stream.
void add_gemms(Dag& dag, const Region& region, int rank, int stream, bool whole, const std::string& label);

// Builders per variant (baseline.cpp, async_tp.cpp, nccl_p2p.cpp, ring.cpp, fused.cpp).
void gather_baseline(Dag& dag, const Region& r);
void scatter_baseline(Dag& dag, const Region& r);
void all_reduce_baseline(Dag& dag, const Region& r);
void all_to_all_baseline(Dag& dag, const Region& r);
void gather_async_tp(Dag& dag, const Region& r);
void scatter_async_tp(Dag& dag, const Region& r);
void gather_async_tp_single_stream(Dag& dag, const Region& r);
void scatter_async_tp_single_stream(Dag& dag, const Region& r);
void gather_async_tp_nccl(Dag& dag, const Region& r);
void scatter_async_tp_nccl(Dag& dag, const Region& r);
void gather_ring(Dag& dag, const Region& r);
void scatter_ring(Dag& dag, const Region& r);
void gather_ring_bidirectional(Dag& dag, const Region& r);
void scatter_ring_bidirectional(Dag& dag, const Region& r);
void gather_fused(Dag& dag, const Region& r);
// A group of one rank: nothing to gather or scatter, the region's GEMMs whole.
void whole_on_one_rank(Dag& dag, const Region& r);
// Every rank already holds the whole input (TP without sequence parallelism): the
// region's GEMMs whole on each rank, nothing to gather.
void gather_replicated(Dag& dag, const Region& r);

}  // namespace tpsim::strategy
