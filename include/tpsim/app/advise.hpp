#pragma once
// `tpsim advise`: for a training step's model, GPU count and global batch, every mesh
// (tp, pp, fsdp / dp / HSDP), schedule and checkpointing that the model allows, each
// simulated with every variant of the scenario; ranked fastest first among those that
// fit in memory.
#include <string>
#include <vector>

#include "tpsim/io/json_reader.hpp"
#include "tpsim/step/training_step.hpp"

namespace tpsim {

struct AdviceRow {
  Json workload;  // the candidate's workload (what to put in a scenario)
  std::string mesh, schedule, checkpoint, variant;
  std::int64_t local_batch = 0;
  int microbatches = 0;
  Tick step_time = 0;
  double tokens_per_s_per_gpu = 0, mfu = 0, peak_memory_bytes = 0;
  bool oom = false;
};

struct Advice {
  std::vector<AdviceRow> rows;  // every candidate x variant, fitting ones first, fastest first
  int candidates = 0;           // meshes x schedules x checkpointing tried
  int invalid = 0;              // refused by the model (heads, layers, batch do not divide)
};

// `scenario_json`: a training_step scenario; its global batch (local_batch x dp x fsdp
// sequences) is kept. `base_dir`: where its hardware path resolves. `jobs`: threads that
// simulate the candidates (0: every core); the ranking is the same whatever the count.
Advice advise(const Json& scenario_json, const std::string& base_dir, unsigned jobs = 0);

std::string format_advice(const Advice& a, const Scenario& base, int top);
Json advice_json(const Advice& a, int top);

}  // namespace tpsim
