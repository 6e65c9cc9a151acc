#pragma once
// Internal to strategies/: whole Llama decoder layers (or their FFN or attention
// half) as a sequence of TP regions and local kernels, each region built by the
// variant's gather / scatter builders.
#include "regions.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim::strategy {

// On the DAG's process group `pg` (the TP group: it shards the layer and runs its regions).
void build_layers(Dag& dag, const Scenario& s, const VariantBuilders& variant, int pg = Dag::kWorld);

}  // namespace tpsim::strategy
