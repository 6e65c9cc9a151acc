#include "tpsim/strategies/registry.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "tpsim/strategies/builders.hpp"

namespace tpsim {

namespace {

struct Entry {
  std::string op;
  std::string variant;
  std::function<void(Dag&, const Scenario&)> build;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      {"matmul", "baseline", build_matmul_baseline},
      {"allgather_matmul", "baseline", build_allgather_matmul_baseline},
      {"allgather_matmul", "async_tp", build_allgather_matmul_async_tp},
      {"allgather_matmul", "async_tp_single_stream", build_allgather_matmul_async_tp_single_stream},
      {"allgather_matmul", "async_tp_nccl", build_allgather_matmul_async_tp_nccl},
      {"allgather_matmul", "ring", build_allgather_matmul_ring},
      {"allgather_matmul", "ring_bidirectional", build_allgather_matmul_ring_bidirectional},
      {"allgather_matmul", "fused", build_allgather_matmul_fused},
      {"matmul_reducescatter", "baseline", build_matmul_reducescatter_baseline},
      {"matmul_reducescatter", "async_tp", build_matmul_reducescatter_async_tp},
      {"matmul_reducescatter", "async_tp_single_stream", build_matmul_reducescatter_async_tp_single_stream},
      {"matmul_reducescatter", "async_tp_nccl", build_matmul_reducescatter_async_tp_nccl},
      {"matmul_reducescatter", "ring", build_matmul_reducescatter_ring},
      {"matmul_reducescatter", "ring_bidirectional", build_matmul_reducescatter_ring_bidirectional},
  };
  return table;
}

}  // namespace

std::vector<std::string> workload_ops() { return {"matmul", "allgather_matmul", "matmul_reducescatter"}; }

std::vector<std::string> variants_for(const std::string& op) {
  std::vector<std::string> out;
  for (const auto& e : entries())
    if (e.op == op) out.push_back(e.variant);
  return out;
}

bool supports(const std::string& op, const std::string& variant) {
  const auto v = variants_for(op);
  return std::find(v.begin(), v.end(), variant) != v.end();
}

Dag build_dag(const Scenario& s, const std::string& variant) {
  for (const auto& e : entries()) {
    if (e.op != s.workload.op || e.variant != variant) continue;
    Dag dag(s.gpus);
    e.build(dag, s);
    return dag;
  }
  throw std::logic_error("no strategy for " + s.workload.op + " / " + variant);
}

}  // namespace tpsim
