#include "tpsim/strategies/registry.hpp"

#include <algorithm>
#include <stdexcept>

#include "layer.hpp"
#include "regions.hpp"

namespace tpsim {

namespace {

using namespace strategy;

struct Variant {
  std::string name;
  VariantBuilders builders;
  // Peers' buffers mapped into every rank's address space over NVLink: PyTorch's
  // symmetric memory (enable_symm_mem_for_group refuses ranks "on different hosts",
  // torch/distributed/_symmetric_memory/__init__.py) and the Pallas Mosaic GPU kernel's
  // TMA copies into plgpu.remote_ref buffers "over NVLINK" (seed 002). Such a variant
  // runs only inside one node.
  bool one_node = false;
  // Defined for a group of one GPU. NCCL's collectives of one rank copy the buffer
  // (ncclLaunchOneRank, src/device/onerank.cu); PyTorch's symmetric-memory loops run
  // their barriers and the whole matmul with no step between (measured with torch 2.11:
  // barrier, GEMM, barrier, sum). The ring, NCCL-p2p and fused kernels are not.
  bool one_gpu = false;
  // Builds one rank of a larger group on one GPU (Region::emulated_group).
  bool emulates_rank = false;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> table = {
      {"baseline", {gather_baseline, scatter_baseline, all_reduce_baseline, all_to_all_baseline, false, true}, false, true},
      {"async_tp", {gather_async_tp, scatter_async_tp, nullptr, nullptr, true, true}, true, true, true},
      {"async_tp_single_stream", {gather_async_tp_single_stream, scatter_async_tp_single_stream, nullptr, nullptr, true, true}, true, true, true},
      {"async_tp_nccl", {gather_async_tp_nccl, scatter_async_tp_nccl, nullptr, nullptr}, false},
      {"ring", {gather_ring, scatter_ring, nullptr, nullptr}, false},
      {"ring_bidirectional", {gather_ring_bidirectional, scatter_ring_bidirectional, nullptr, nullptr}, false},
      {"fused", {gather_fused, nullptr, nullptr, nullptr}, true},
  };
  return table;
}

const Variant* find_variant(const std::string& name) {
  for (const auto& v : variants())
    if (v.name == name) return &v;
  return nullptr;
}

RegionBuilder builder_for(const Variant& v, RegionKind kind) {
  switch (kind) {
    case RegionKind::gather: return v.builders.gather;
    case RegionKind::scatter: return v.builders.scatter;
    case RegionKind::all_reduce: return v.builders.all_reduce;
    case RegionKind::all_to_all: return v.builders.all_to_all;
  }
  return nullptr;
}

Region single_region(const Scenario& s, RegionKind kind, int pg, int group_size) {
  static constexpr const char* kNames[] = {"ag_mm", "mm_rs", "mm_ar", "a2a_mm"};
  const Workload& w = s.workload;
  Region r{kNames[static_cast<int>(kind)], pg, s.dtype, 0, {}, s.software.symm_mem_reduction};
  if (w.emulated_group > 0) group_size = r.emulated_group = w.emulated_group;
  const double e = dtype_bytes(s.dtype);
  if (kind == RegionKind::all_to_all) {
    // Uniform routing, one expert per rank: a rank sends m/G rows to each rank and
    // receives m/G from each, so its expert multiplies m rows.
    r.bytes = static_cast<double>(w.m) * static_cast<double>(w.k) * e;
    for (std::int64_t n : w.n) r.gemms.push_back({{w.m, n, w.k}, {w.m / group_size, n, w.k}});
    return r;
  }
  if (kind == RegionKind::all_reduce) {
    // Every rank multiplies its contraction shard whole and sums the [m, n] partials.
    r.bytes = static_cast<double>(w.m) * static_cast<double>(w.n_total()) * e;
    for (std::int64_t n : w.n) r.gemms.push_back({{w.m, n, w.k}, {w.m, n, w.k}});
    return r;
  }
  const std::int64_t rows = w.m / group_size;
  r.bytes = kind == RegionKind::gather ? static_cast<double>(rows) * w.k * e : static_cast<double>(rows) * w.n_total() * e;
  for (std::int64_t n : w.n) r.gemms.push_back({{w.m, n, w.k}, {rows, n, w.k}});
  return r;
}

}  // namespace

std::vector<std::string> tp_variants(RegionKind kind) {
  std::vector<std::string> out;
  for (const auto& v : variants())
    if (builder_for(v, kind)) out.push_back(v.name);
  return out;
}

bool variant_needs_one_node(const std::string& variant) {
  const Variant* v = find_variant(variant);
  return v && v->one_node;
}

bool variant_runs_on_one_gpu(const std::string& variant) {
  const Variant* v = find_variant(variant);
  return v && v->one_gpu;
}

bool variant_emulates_one_rank(const std::string& variant) {
  const Variant* v = find_variant(variant);
  return v && v->emulates_rank;
}

bool variant_is_micro_pipeline(const std::string& variant) {
  const Variant* v = find_variant(variant);
  return v && v->builders.micro_pipeline;
}

Dag build_matmul_dag(const Scenario& s) {
  Dag dag(s.gpus);
  dag.set_host_issue(s.software.op_issue);
  for (int r = 0; r < s.gpus; ++r)
    for (std::int64_t n : s.workload.n) dag.add(r, kCompute, "matmul", GemmOp{{s.workload.m, n, s.workload.k, s.dtype}});
  return dag;
}

void add_region(Dag& dag, int pg, const Scenario& s, const std::string& variant, RegionKind kind) {
  const Variant* v = find_variant(variant);
  const RegionBuilder build = v ? builder_for(*v, kind) : nullptr;
  if (!build) throw std::logic_error("no region builder for " + variant);
  build(dag, single_region(s, kind, pg, dag.process_group(pg).size()));
}

void add_layers(Dag& dag, int pg, const Scenario& s, const std::string& variant) {
  const Variant* v = find_variant(variant);
  if (!v) throw std::logic_error("no strategy " + variant);
  if (dag.process_group(pg).size() == 1) {
    // One rank (a training step without TP): the layer's GEMMs whole, no collective to overlap.
    build_layers(dag, s, VariantBuilders{whole_on_one_rank, whole_on_one_rank, nullptr, nullptr}, pg);
  } else if (!s.workload.sequence_parallel) {
    // Without sequence parallelism the input of a column-parallel GEMM (and the output
    // gradient of a row-parallel one) is already whole on every rank, and what sequence
    // parallelism reduce-scatters is all-reduced.
    if (!v->builders.all_reduce) throw std::logic_error(variant + " has no all-reduce form");
    build_layers(dag, s, VariantBuilders{gather_replicated, v->builders.all_reduce, nullptr, nullptr}, pg);
  } else {
    build_layers(dag, s,
                 VariantBuilders{v->builders.gather, v->builders.scatter ? v->builders.scatter : scatter_baseline, nullptr, nullptr,
                                 v->builders.micro_pipeline, v->builders.functional_collectives},
                 pg);
  }
}

Dag build_region_dag(const Scenario& s, const std::string& variant, RegionKind kind) {
  Dag dag(s.gpus);
  dag.set_host_issue(s.software.op_issue);
  add_region(dag, Dag::kWorld, s, variant, kind);
  return dag;
}

Dag build_layer_dag(const Scenario& s, const std::string& variant) {
  Dag dag(s.gpus);
  dag.set_host_issue(s.software.op_issue);
  add_layers(dag, Dag::kWorld, s, variant);
  return dag;
}

}  // namespace tpsim
