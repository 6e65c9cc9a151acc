#include "tpsim/report/step_result_writers.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tpsim/io/json_numbers.hpp"
#include "tpsim/io/printable.hpp"

namespace tpsim {

namespace {

double ms(Tick t) { return static_cast<double>(t) * 1e-9; }
double gib(double bytes) { return bytes / 1073741824.0; }

std::string mesh_text(const TrainingStepSpec& t) {
  std::vector<std::string> parts;
  for (MeshDim d : t.mesh.order)
    if (t.mesh.size(d) > 1) parts.push_back(fmt::format("{}{}", mesh_dim_name(d), t.mesh.size(d)));
  return parts.empty() ? "one GPU" : fmt::format("{}", fmt::join(parts, " x "));
}

// The stage that ends last: the step's own timeline (the first such on a tie).
std::size_t critical_stage(const StepVariantRun& run) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < run.sim.stages.size(); ++i)
    if (run.sim.stages[i].end > run.sim.stages[best].end) best = i;
  return best;
}

// "gemm 55.2%, collective 24.1%, ...": `parts` largest first, those under 0.05% of `of` left out.
std::string shares_text(std::vector<std::pair<std::string, Tick>> parts, Tick of, const std::string& prefix = "") {
  std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> out;
  for (const auto& [kind, t] : parts)
    if (of > 0 && 1000 * t >= of) out.push_back(fmt::format("{}{} {:.1f}%", prefix, kind, 100.0 * static_cast<double>(t) / static_cast<double>(of)));
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace

std::string format_step_table(const StepResult& r) {
  const Scenario& s = r.scenario;
  const TrainingStepSpec& t = s.workload.step;
  const std::string pipeline =
      t.mesh.size(MeshDim::pp) > 1
          ? fmt::format(", {}{} with {} microbatches of {}", pipeline_schedule_name(t.schedule),
                        t.virtual_stages > 1 ? fmt::format(" ({} virtual stages)", t.virtual_stages) : "", t.microbatches,
                        t.microbatch_sequences())
          : t.microbatches > 1 ? fmt::format(", gradient accumulation over {} microbatches of {}", t.microbatches, t.microbatch_sequences())
                               : "";
  std::vector<std::string> fp8_gathers;
  if (t.tp_fp8_all_gather && t.sequence_parallel && t.mesh.size(MeshDim::tp) > 1) fp8_gathers.emplace_back("TP");
  if (t.weights_gathered_in_fp8()) fp8_gathers.emplace_back("FSDP");
  const std::string fp8_gather =
      fp8_gathers.empty() ? ""
                          : fmt::format(" ({} all-gathers in fp8{})", fmt::join(fp8_gathers, " and "),
                                        t.weights_gathered_in_fp8() && t.fsdp_fp8_all_gather == Fp8AllGather::precomputed_scale
                                            ? ", precomputed weight scales"
                                            : "");
  const std::string recipe = t.linear_dtype == Dtype::fp8 && t.fp8.rowwise()
                                 ? fmt::format(" rowwise-scaled ({})", t.fp8.aten_rowwise_kernel ? "ATen's kernel" : "cuBLAS")
                                 : "";
  const std::string linears = t.linear_dtype ? fmt::format(", {}{} linears{}", dtype_name(*t.linear_dtype), recipe, fp8_gather) : "";
  const std::string cp = t.mesh.size(MeshDim::cp) > 1 ? fmt::format(", cp_method {}", cp_method_name(t.cp_method)) : "";
  const std::string attention =
      t.attention.impl == AttentionImpl::unfused
          ? fmt::format(", unfused attention{}", t.attention.dropout > 0 ? fmt::format(" (dropout {:g})", t.attention.dropout) : "")
          : "";
  // PyTorch's loss is named (Megatron-LM's in-place one is the default).
  const std::string loss = !t.pytorch_loss() ? ""
                           : fmt::format(", loss: {}{}", t.cross_entropy == CrossEntropy::compiled ? "compiled" : "aten",
                                         t.loss_chunks > 1 ? fmt::format(" in {} chunks", t.loss_chunks) : "");
  std::string out = fmt::format("{}: training_step {} seq_len={} local_batch={} mesh {} (inner to outer){}{}, checkpoint {}{}{}{}{}\n",
                                s.name.empty() ? "scenario" : printable(s.name), t.model.name, t.seq_len, t.local_batch, mesh_text(t), cp,
                                pipeline, checkpointing_name(t.checkpoint), linears, attention, loss, t.compile ? ", compiled" : "");
  out += fmt::format("{} GPUs x {}, {}; global batch {} tokens\n", s.gpus, s.hardware.name, dtype_name(s.dtype), t.global_tokens());
  out += fmt::format("{:<22} {:>10} {:>8} {:>12} {:>6} {:>9} {:>7}  {}\n", "variant", "step_ms", "speedup", "tokens/s/GPU", "MFU%",
                     "peak_GiB", "bubble%", "exposed ms: tp cp ep fsdp dp pp");
  for (const auto& run : r.runs) {
    const auto sp = r.speedup(run);
    out += fmt::format("{:<22} {:>10.1f} {:>8} {:>12.0f} {:>6.1f} {:>9.1f} {:>7.1f}  {:.1f} {:.1f} {:.1f} {:.1f} {:.1f} {:.1f}{}\n", run.variant,
                       ms(run.sim.makespan), sp ? fmt::format("{:.3f}x", *sp) : "-", run.tokens_per_s_per_gpu, 100 * run.mfu,
                       gib(run.peak_memory_bytes), 100 * run.bubble_fraction, ms(run.exposed("tp")), ms(run.exposed("cp")), ms(run.exposed("ep")), ms(run.exposed("fsdp")),
                       ms(run.exposed("dp")), ms(run.exposed("pp")), run.oom ? "  OUT OF MEMORY" : "");
  }
  // Where each variant's step goes: its last stage's compute by kind of work (a layer pass
  // split as its critical path is) and what that stage waited for.
  for (const auto& run : r.runs) {
    const auto& st = run.sim.stages[critical_stage(run)];
    const std::string waiting = shares_text(st.idle_by_cause, run.sim.makespan, "waiting for ");
    out += fmt::format("{} (stage {}): {}{}{}\n", run.variant, critical_stage(run), shares_text(st.busy_by_kind, run.sim.makespan),
                       waiting.empty() ? "" : ", ", waiting);
  }
  for (const auto& run : r.runs)
    if (run.oom) {
      out += fmt::format("{}: out of memory: pipeline stage {} needs {:.1f} GiB of {:.1f} GiB (", run.variant, run.peak_stage,
                         gib(run.peak_memory_bytes), gib(s.hardware.memory.capacity_bytes));
      std::vector<std::string> parts;
      for (const auto& [kind, b] : run.memory[static_cast<std::size_t>(run.peak_stage)].parts)
        if (b > 0) parts.push_back(fmt::format("{} {:.1f}", kind, gib(b)));
      out += fmt::format("{}); the times above are what it would take if it fitted\n", fmt::join(parts, ", "));
    }
  return out;
}

Json step_result_json(const StepResult& r) {
  const Scenario& s = r.scenario;
  const TrainingStepSpec& t = s.workload.step;
  Json j = scenario_header_json(s);
  j["global_batch_tokens"] = t.global_tokens();
  j["model_flops_per_step"] = r.model_flops;
  j["memory_capacity_gib"] = round_to(gib(s.hardware.memory.capacity_bytes), 3);
  j["results"] = Json::array();
  for (const auto& run : r.runs) {
    Json v;
    v["variant"] = run.variant;
    v["step_time_ms"] = round_to(ms(run.sim.makespan), 4);
    const auto sp = r.speedup(run);
    v["speedup_vs_baseline"] = sp ? Json(round_to(*sp, 4)) : Json(nullptr);
    v["tokens_per_s_per_gpu"] = round_to(run.tokens_per_s_per_gpu, 2);
    v["mfu"] = round_to(run.mfu, 4);
    v["peak_memory_gib"] = round_to(gib(run.peak_memory_bytes), 3);
    v["oom"] = run.oom;
    v["peak_memory_stage"] = run.peak_stage;
    Json mem;
    for (const auto& [kind, b] : run.memory[static_cast<std::size_t>(run.peak_stage)].parts) mem[kind] = round_to(gib(b), 3);
    v["memory_gib"] = mem;
    v["bubble_fraction"] = round_to(run.bubble_fraction, 4);
    Json ex;
    for (const std::string dim : {"tp", "cp", "ep", "fsdp", "dp", "pp"}) ex[dim] = round_to(ms(run.exposed(dim)), 4);
    if (run.exposed("other") > 0) ex["other"] = round_to(ms(run.exposed("other")), 4);
    v["exposed_comm_ms"] = ex;
    v["layer_ms"] = {{"forward", round_to(ms(run.costs.forward), 5)},
                     {"backward", round_to(ms(run.costs.backward), 5)},
                     {"recompute", round_to(ms(run.costs.recompute), 5)},
                     {"output_forward", round_to(ms(run.costs.output_forward), 5)},
                     {"output_backward", round_to(ms(run.costs.output_backward), 5)}};
    if (run.costs.moe)
      v["moe_layer_ms"] = {{"forward", round_to(ms(run.costs.moe->forward), 5)},
                           {"backward", round_to(ms(run.costs.moe->backward), 5)},
                           {"recompute", round_to(ms(run.costs.moe->recompute), 5)}};
    Json coll = Json::array();
    for (const auto& c : run.plan.collectives)
      coll.push_back({{"dim", c.dim}, {"op", c.op}, {"bytes", c.bytes}, {"time_ms", round_to(ms(c.cost.time), 5)},
                      {"algorithm", c.cost.algorithm}, {"protocol", c.cost.protocol}, {"link", std::string(link_tier_name(c.cost.tier))},
                      {"sms", c.cost.channels}});
    v["collectives"] = coll;
    Json stages = Json::array();
    for (std::size_t i = 0; i < run.sim.stages.size(); ++i) {
      const auto& st = run.sim.stages[i];
      Json idle;
      for (const auto& [cause, tt] : st.idle_by_cause) idle[cause] = round_to(ms(tt), 4);
      Json busy;
      for (const auto& [kind, tt] : st.busy_by_kind) busy[kind] = round_to(ms(tt), 4);
      stages.push_back({{"stage", i}, {"compute_busy_ms", round_to(ms(st.compute_busy), 4)}, {"busy_ms_by_kind", busy}, {"idle_ms", idle},
                        {"memory_gib", round_to(gib(run.memory[i].total()), 3)}});
    }
    v["stages"] = stages;
    v["critical_stage"] = critical_stage(run);
    v["simulated_tasks"] = run.plan.program.tasks.size();
    v["simulated_events"] = run.sim.events;
    j["results"].push_back(v);
  }
  return j;
}

}  // namespace tpsim
