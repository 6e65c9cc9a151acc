#pragma once
// Strategies turn (workload, variant) into an op DAG over every rank of one TP group.
// Variants are registered explicitly here and selected by name from scenario data;
// which workload kind uses which builder is io/workload_kinds' table.
#include <string>
#include <vector>

#include "tpsim/dag/dag.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

// A region: all-gather -> matmul, matmul -> reduce-scatter, matmul -> all-reduce (tensor
// parallelism without sequence parallelism), or all-to-all -> matmul -> all-to-all (expert
// parallelism: tokens to the GPU of their expert and back).
enum class RegionKind { gather, scatter, all_reduce, all_to_all };

// The TP variants that have a form for `kind`, in table order.
std::vector<std::string> tp_variants(RegionKind kind);

// Whether `variant` maps peers' memory over NVLink, so that its group must sit in one node.
bool variant_needs_one_node(const std::string& variant);
// Whether `variant` has a form for a group of one GPU: what its implementation runs when
// the group holds one rank (NCCL copies the buffer; PyTorch's pipelined loops take no step).
bool variant_runs_on_one_gpu(const std::string& variant);
// Whether `variant` can build one rank of a larger group on one GPU (Workload::emulated_group).
bool variant_emulates_one_rank(const std::string& variant);
// Whether `variant` is the decomposition torch.compile's micro-pipeline TP pass inserts
// (PyTorch's symmetric-memory async TP), which applies where its patterns match.
bool variant_is_micro_pipeline(const std::string& variant);

// One GEMM (per weight) on every rank, nothing shared.
Dag build_matmul_dag(const Scenario& s);
// One region of `kind`, built by `variant`.
Dag build_region_dag(const Scenario& s, const std::string& variant, RegionKind kind);
// Whole decoder layers (or their attention or FFN half); a variant without a
// reduce-scatter form keeps NCCL's for those regions.
Dag build_layer_dag(const Scenario& s, const std::string& variant);
// The same on process group `pg` of a DAG that may hold several groups: the group's
// ranks shard the rows (region) or the layer, in the group's ring order; the
// scenario's `gpus` is read only for its op budget.
void add_region(Dag& dag, int pg, const Scenario& s, const std::string& variant, RegionKind kind);
void add_layers(Dag& dag, int pg, const Scenario& s, const std::string& variant);
// Throws SimulationLimit when the layers' op graph would pass Dag::kMaxOps: what
// build_layer_dag would refuse, found without building it (a sweep checks every point first).
void check_layer_op_budget(const Scenario& s);

}  // namespace tpsim
