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

bool is_layer_op(const std::string& op) { return op == "transformer_layer" || op == "ffn" || op == "attention"; }

Region single_region(const Scenario& s, bool gather) {
  const Workload& w = s.workload;
  Region r{gather ? "ag_mm" : "mm_rs", s.gpus, s.dtype, 0, {}, s.software.symm_mem_reduction};
  const std::int64_t rows = w.m / s.gpus;
  const double e = dtype_bytes(s.dtype);
  r.bytes = gather ? static_cast<double>(rows) * w.k * e : static_cast<double>(rows) * w.n_total() * e;
  for (std::int64_t n : w.n) r.gemms.push_back({{w.m, n, w.k}, {rows, n, w.k}});
  return r;
}

}  // namespace

std::vector<std::string> workload_ops() {
  return {"matmul", "allgather_matmul", "matmul_reducescatter", "transformer_layer", "ffn", "attention", "training_step"};
}

std::vector<std::string> variants_for(const std::string& op) {
  if (op == "matmul") return {"baseline"};
  std::vector<std::string> out;
  for (const auto& v : variants())
    if (op != "matmul_reducescatter" || v.builders.scatter) out.push_back(v.name);
  return out;
}

bool supports(const std::string& op, const std::string& variant) {
  const auto v = variants_for(op);
  return std::find(v.begin(), v.end(), variant) != v.end();
}

Dag build_dag(const Scenario& s, const std::string& variant) {
  const Variant* v = find_variant(variant);
  if (s.workload.op == "training_step") throw std::logic_error("a training step is simulated by run_training_step, not as one DAG");
  if (!v || !supports(s.workload.op, variant)) throw std::logic_error("no strategy for " + s.workload.op + " / " + variant);
  Dag dag(s.gpus);
  dag.set_host_issue(s.software.op_issue);
  const std::string& op = s.workload.op;
  if (op == "matmul") {
    for (int r = 0; r < s.gpus; ++r)
      for (std::int64_t n : s.workload.n) dag.add(r, kCompute, "matmul", GemmOp{{s.workload.m, n, s.workload.k, s.dtype}});
  } else if (op == "allgather_matmul") {
    v->builders.gather(dag, single_region(s, true));
  } else if (op == "matmul_reducescatter") {
    v->builders.scatter(dag, single_region(s, false));
  } else if (is_layer_op(op) && s.gpus == 1) {
    // One rank (a training step without TP): the layer's GEMMs whole, no collective to overlap.
    build_layers(dag, s, VariantBuilders{gather_local, scatter_local});
  } else if (is_layer_op(op)) {
    // A variant without a reduce-scatter form keeps NCCL's for those regions.
    build_layers(dag, s, VariantBuilders{v->builders.gather, v->builders.scatter ? v->builders.scatter : scatter_baseline});
  }
  return dag;
}

void check_op_budget(const Scenario& s) {
  // Single-region workloads have a few ops per rank and step: far below the bound.
  if (is_layer_op(s.workload.op)) check_layer_op_budget(s);
}

}  // namespace tpsim
