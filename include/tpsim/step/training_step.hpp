#pragma once
// A training step on a device mesh, per TP variant: the layer costs from the
// block-level TP simulation, the step's tasks on one rank per pipeline stage, the
// memory ledger, and what a user asks of it (step time, tokens/s per GPU, MFU,
// peak memory, bubble, exposed communication per mesh dimension).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/step/step_program.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

struct StepVariantRun {
  std::string variant;
  LayerCosts costs;
  StepPlan plan;
  StepSimulation sim;
  std::vector<MemoryLedger> memory;  // per stage
  int peak_stage = 0;
  double peak_memory_bytes = 0;
  bool oom = false;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  double bubble_fraction = 0;                // pipeline idle / step time, mean over stages
  std::map<std::string, Tick> exposed_comm;  // per mesh dimension, mean over stages
  Tick exposed(const std::string& dim) const {  // 0 for a dimension with nothing exposed
    const auto it = exposed_comm.find(dim);
    return it == exposed_comm.end() ? 0 : it->second;
  }
};

struct StepResult {
  Scenario scenario;
  double model_flops = 0;  // per step, the whole mesh
  std::vector<StepVariantRun> runs;
  std::optional<double> speedup(const StepVariantRun& run) const;
};

// Model FLOPs of one token's forward and backward: 6 per weight of the layers and the
// output projection, plus causal attention (QK^T and PV over half the sequence on
// average, 3x for backward). The embedding is a lookup and counts nothing.
double model_flops_per_token(const TrainingStepSpec& t);

StepResult run_training_step(const Scenario& s);
// One variant from its layer costs (simulate_layer_costs), which depend only on the TP
// group, the microbatch, checkpointing and the linears (and whether FSDP gathers their
// weights in fp8): a search over meshes reuses them.
StepVariantRun run_step_variant(const Scenario& s, const std::string& variant, const LayerCosts& costs);

}  // namespace tpsim
