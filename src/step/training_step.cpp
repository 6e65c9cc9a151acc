#include "tpsim/step/training_step.hpp"

namespace tpsim {

std::optional<double> StepResult::speedup(const StepVariantRun& run) const {
  for (const auto& r : runs)
    if (r.variant == "baseline" && run.sim.makespan > 0)
      return static_cast<double>(r.sim.makespan) / static_cast<double>(run.sim.makespan);
  return std::nullopt;
}

double model_flops_per_token(const TrainingStepSpec& t) {
  const auto& m = t.model;
  double weights = m.embedding_params();  // the output projection (the embedding is a lookup)
  for (std::int64_t l = 0; l < m.layers; ++l) weights += m.active_layer_params(l);
  // Causal attention forward and backward: 3 x seq x heads x (Q K^T width + P V width) per token.
  const double attention = static_cast<double>(m.layers) * 3.0 * static_cast<double>(t.seq_len) * static_cast<double>(m.heads) *
                           static_cast<double>(m.head_dim + m.v_head_dim());
  return 6.0 * weights + attention;
}

StepVariantRun run_step_variant(const Scenario& s, const std::string& variant, const LayerCosts& costs) {
  const TrainingStepSpec& t = s.workload.step;
  const double e = dtype_bytes(s.dtype);
  StepVariantRun run;
  run.variant = variant;
  run.costs = costs;
  run.plan = plan_step(t, run.costs, s.hardware, s.dtype);
  run.sim = simulate_step(run.plan.program);
  const int stages = t.mesh.size(MeshDim::pp);
  for (int r = 0; r < stages; ++r) {
    StageMemoryInput in;
    const StageParams& p = run.plan.stages[static_cast<std::size_t>(r)];
    in.local_params = p.local;
    in.shard_params = p.shard;
    in.largest_layer = p.largest_layer;
    in.edge_params = p.edge;
    in.peak_activations = run.sim.stages[static_cast<std::size_t>(r)].peak_activation_bytes;
    in.pipeline_buffers = p.pipeline_buffers;
    in.output_input_received = p.output_input_received;
    in.last_stage = r == run.plan.last_stage;
    run.memory.push_back(stage_memory(t, in, s.hardware, e));
    if (run.memory.back().total() > run.peak_memory_bytes) run.peak_memory_bytes = run.memory.back().total(), run.peak_stage = r;
  }
  run.oom = run.peak_memory_bytes > s.hardware.memory.capacity_bytes;
  const double seconds = static_cast<double>(run.sim.makespan) * 1e-12;
  run.tokens_per_s_per_gpu = static_cast<double>(t.global_tokens()) / seconds / s.gpus;
  run.mfu = model_flops_per_token(t) * static_cast<double>(t.global_tokens()) / seconds / s.gpus /
            (s.hardware.peak_flops_per_ps[static_cast<int>(s.dtype)] * 1e12);
  // Compute-stream waits per stage, by what they waited for.
  std::map<std::string, double> exposed;
  for (const auto& st : run.sim.stages)
    for (const auto& [cause, idle] : st.idle_by_cause) exposed[cause] += static_cast<double>(idle) / stages;
  if (stages > 1) run.bubble_fraction = exposed["pp"] / static_cast<double>(run.sim.makespan);
  for (const auto& [cause, idle] : exposed) run.exposed_comm[cause] = static_cast<Tick>(idle);
  // TP, CP and EP communication is exposed inside every layer pass (the block-level, CP and
  // MoE simulations' own figures), per stage on average. Full checkpointing runs every
  // layer's forward again inside its backward, and again in each weight half a zero-bubble
  // schedule splits off (weight_gradients.hpp).
  const bool full = t.checkpoint == Checkpointing::full;
  const auto inside = [&](const LayerPasses& p, Tick fwd, Tick bwd) {
    const double f = p.forward / stages, b = p.backward / stages, w = p.weight_halves / stages;
    return (f + (full ? b + w : 0)) * static_cast<double>(fwd) + b * static_cast<double>(bwd);
  };
  const LayerPasses& dense = run.plan.dense_passes;
  const LayerPasses& moe = run.plan.moe_passes;
  double tp = inside(dense, run.costs.forward_exposed_comm, run.costs.backward_exposed_comm);
  if (run.costs.moe) {
    tp += inside(moe, run.costs.moe->tp_forward_exposed, run.costs.moe->tp_backward_exposed);
    run.exposed_comm["ep"] = static_cast<Tick>(inside(moe, run.costs.moe->ep_forward_exposed, run.costs.moe->ep_backward_exposed));
  }
  run.exposed_comm["tp"] = static_cast<Tick>(tp);
  if (t.mesh.size(MeshDim::cp) > 1) {
    LayerPasses all{dense.forward + moe.forward, dense.backward + moe.backward, dense.weight_halves + moe.weight_halves};
    run.exposed_comm["cp"] = static_cast<Tick>(inside(all, run.costs.cp_forward_exposed, run.costs.cp_backward_exposed));
  }
  return run;
}

StepResult run_training_step(const Scenario& s) {
  const TrainingStepSpec& t = s.workload.step;
  StepResult result{s, model_flops_per_token(t) * static_cast<double>(t.global_tokens()), {}};
  for (const std::string& v : s.variants) result.runs.push_back(run_step_variant(s, v, simulate_layer_costs(s, v)));
  return result;
}

}  // namespace tpsim
