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
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> table = {
      {"baseline", {gather_baseline, scatter_baseline}},
      {"async_tp", {gather_async_tp, scatter_async_tp}},
      {"async_tp_single_stream", {gather_async_tp_single_stream, scatter_async_tp_single_stream}},
      {"async_tp_nccl", {gather_async_tp_nccl, scatter_async_tp_nccl}},
      {"ring", {gather_ring, scatter_ring}},
      {"ring_bidirectional", {gather_ring_bidirectional, scatter_ring_bidirectional}},
      {"fused", {gather_fused, nullptr}},
  };
  return table;
}

const Variant* find_variant(const std::string& name) {
  for (const auto& v : variants())
    if (v.name == name) return &v;
  return nullptr;
}

Region single_region(const Scenario& s, bool gather, int pg, int group_size) {
  const Workload& w = s.workload;
  Region r{gather ? "ag_mm" : "mm_rs", pg, s.dtype, 0, {}, s.software.symm_mem_reduction};
  const std::int64_t rows = w.m / group_size;
  const double e = dtype_bytes(s.dtype);
  r.bytes = gather ? static_cast<double>(rows) * w.k * e : static_cast<double>(rows) * w.n_total() * e;
  for (std::int64_t n : w.n) r.gemms.push_back({{w.m, n, w.k}, {rows, n, w.k}});
  return r;
}

}  // namespace

std::vector<std::string> tp_variants(bool needs_scatter) {
  std::vector<std::string> out;
  for (const auto& v : variants())
    if (!needs_scatter || v.builders.scatter) out.push_back(v.name);
  return out;
}

Dag build_matmul_dag(const Scenario& s) {
  Dag dag(s.gpus);
  dag.set_host_issue(s.software.op_issue);
  for (int r = 0; r < s.gpus; ++r)
    for (std::int64_t n : s.workload.n) dag.add(r, kCompute, "matmul", GemmOp{{s.workload.m, n, s.workload.k, s.dtype}});
  return dag;
}

void add_region(Dag& dag, int pg, const Scenario& s, const std::string& variant, bool gather) {
  const Variant* v = find_variant(variant);
  if (!v || (!gather && !v->builders.scatter)) throw std::logic_error("no region builder for " + variant);
  (gather ? v->builders.gather : v->builders.scatter)(dag, single_region(s, gather, pg, dag.process_group(pg).size()));
}

void add_layers(Dag& dag, int pg, const Scenario& s, const std::string& variant) {
  const Variant* v = find_variant(variant);
  if (!v) throw std::logic_error("no strategy " + variant);
  if (dag.process_group(pg).size() == 1) {
    // One rank (a training step without TP): the layer's GEMMs whole, no collective to overlap.
    build_layers(dag, s, VariantBuilders{gather_local, scatter_local}, pg);
  } else {
    build_layers(dag, s, VariantBuilders{v->builders.gather, v->builders.scatter ? v->builders.scatter : scatter_baseline}, pg);
  }
}

Dag build_region_dag(const Scenario& s, const std::string& variant, bool gather) {
  Dag dag(s.gpus);
  dag.set_host_issue(s.software.op_issue);
  add_region(dag, Dag::kWorld, s, variant, gather);
  return dag;
}

Dag build_layer_dag(const Scenario& s, const std::string& variant) {
  Dag dag(s.gpus);
  dag.set_host_issue(s.software.op_issue);
  add_layers(dag, Dag::kWorld, s, variant);
  return dag;
}

void check_layer_op_budget(const Scenario& s) { strategy::check_layer_op_budget(s); }

}  // namespace tpsim
