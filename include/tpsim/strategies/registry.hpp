#pragma once
// Strategies turn (workload, variant) into an op DAG over every rank. Registered
// explicitly here; selection is by name from scenario data.
#include <string>
#include <vector>

#include "tpsim/dag/dag.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

std::vector<std::string> workload_ops();
std::vector<std::string> variants_for(const std::string& op);
bool supports(const std::string& op, const std::string& variant);
Dag build_dag(const Scenario& s, const std::string& variant);
// Throws SimulationLimit when the scenario's op graph would pass Dag::kMaxOps: what
// build_dag would refuse, found without building it (a sweep checks every point first).
void check_op_budget(const Scenario& s);

}  // namespace tpsim
