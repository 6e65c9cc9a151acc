#pragma once
// One builder per (workload, variant). Each appends its ops for every rank.
#include "tpsim/dag/dag.hpp"
#include "tpsim/io/scenario.hpp"

namespace tpsim {

void build_matmul_baseline(Dag& dag, const Scenario& s);
void build_allgather_matmul_baseline(Dag& dag, const Scenario& s);
void build_allgather_matmul_async_tp(Dag& dag, const Scenario& s);
void build_matmul_reducescatter_baseline(Dag& dag, const Scenario& s);
void build_matmul_reducescatter_async_tp(Dag& dag, const Scenario& s);
void build_allgather_matmul_async_tp_single_stream(Dag& dag, const Scenario& s);
void build_matmul_reducescatter_async_tp_single_stream(Dag& dag, const Scenario& s);
void build_allgather_matmul_async_tp_nccl(Dag& dag, const Scenario& s);
void build_matmul_reducescatter_async_tp_nccl(Dag& dag, const Scenario& s);
void build_allgather_matmul_ring(Dag& dag, const Scenario& s);
void build_allgather_matmul_ring_bidirectional(Dag& dag, const Scenario& s);
void build_matmul_reducescatter_ring(Dag& dag, const Scenario& s);
void build_matmul_reducescatter_ring_bidirectional(Dag& dag, const Scenario& s);
void build_allgather_matmul_fused(Dag& dag, const Scenario& s);

}  // namespace tpsim
