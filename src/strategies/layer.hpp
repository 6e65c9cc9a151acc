#pragma once
// Internal to strategies/: whole Llama decoder layers (or their FFN or attention
// half) as a sequence of TP regions and local kernels, each region built by the
// variant's gather / scatter builders.
#include "regions.hpp"
#include "tpsim/io/scenario.hpp"

namespace tpsim::strategy {

void build_layers(Dag& dag, const Scenario& s, const VariantBuilders& variant);

}  // namespace tpsim::strategy
