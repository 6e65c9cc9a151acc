#pragma once
// Every workload a scenario can name, one table entry each: its keys, how it is
// parsed and checked, which variants apply, how its op DAG is built, and a line
// that describes it (tpsim workloads). Adding a workload kind is one entry here.
#include <string>
#include <string_view>
#include <vector>

#include "tpsim/dag/dag.hpp"
#include "tpsim/io/json_reader.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

struct WorkloadKind {
  std::string_view name;     // the scenario's "workload.op"
  std::string_view summary;  // one line for users
  std::vector<std::string> keys;  // of the workload object, besides "op"
  int min_gpus = 1;
  int max_gpus = kMaxGpus;
  // A training step on a device mesh (run by the step simulator), not one TP group's op DAG.
  bool whole_step = false;
  // Its baseline makespan is one collective and one GEMM in sequence: an op-level
  // measurement that calibration may fit (a decomposition's is validation only).
  bool op_level = false;
  // Reads the workload (a reader that admits "op" and `keys` only) for `gpus` GPUs.
  Workload (*parse)(const ObjectReader& w, int gpus) = nullptr;
  // The variants that apply to a parsed workload (all TP regions' forms it needs).
  std::vector<std::string> (*variants)(const Workload& w) = nullptr;
  // The op DAG of one variant; null for a whole step.
  Dag (*build)(const Scenario& s, const std::string& variant) = nullptr;
  // Throws SimulationLimit when `build` would refuse the graph's size; may be null.
  void (*check_budget)(const Scenario& s) = nullptr;
  // Checks the scenario's GPUs and variants against its hardware; returns notes worth a
  // line to the user. Variants the hardware cannot run are refused when the scenario
  // listed them (`variants_listed`) and dropped, with a note, when they were the default.
  std::vector<std::string> (*check_hardware)(Scenario& s, bool variants_listed) = nullptr;
};

const std::vector<WorkloadKind>& workload_kinds();
std::vector<std::string> workload_names();
// The entry named `name`, or null.
const WorkloadKind* find_workload_kind(std::string_view name);
// The entry a workload object (not yet parsed) names by its "op", or null.
const WorkloadKind* workload_kind_named_in(const Json& workload);
// The entry of a parsed scenario's workload (which names one by construction).
const WorkloadKind& workload_kind(const Workload& w);
bool is_training_step(const Workload& w);

// Reads `j` (at `path`) as a workload for `gpus` GPUs, by its "op".
Workload parse_workload(const Json& j, const std::string& path, int gpus);

// The op DAG of `variant` for a scenario of an op-DAG workload (throws std::logic_error
// for a training step, or a variant the workload does not have).
Dag build_dag(const Scenario& s, const std::string& variant);
// What build_dag would refuse for size, found without building it.
void check_op_budget(const Scenario& s);
bool supports(const Scenario& s, const std::string& variant);

// The table as text: one block per kind with its keys, GPUs and variants.
std::string describe_workloads();

}  // namespace tpsim
