#include "tpsim/app/advise.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "tpsim/core/parallel_for.hpp"
#include "tpsim/io/input_error.hpp"
#include "tpsim/io/json_numbers.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/io/workload_kinds.hpp"

namespace tpsim {

namespace {

std::vector<int> powers_of_two_up_to(std::int64_t n) {
  std::vector<int> out;
  for (std::int64_t p = 1; p <= n; p *= 2) out.push_back(static_cast<int>(p));
  return out;
}

struct Layout {
  int tp, pp, fsdp, dp, cp = 1, ep = 1;
  bool sequence_parallel = true;
};

std::vector<Layout> layouts(int gpus, int per_node, std::int64_t layers) {
  std::vector<Layout> out;
  for (int tp : powers_of_two_up_to(std::min(gpus, per_node))) {
    if (gpus % tp != 0) continue;
    for (int pp : powers_of_two_up_to(std::min<std::int64_t>(gpus / tp, layers))) {
      if ((gpus / tp) % pp != 0) continue;
      const int data = gpus / tp / pp;
      // FSDP over all data ranks, plain DP, and HSDP with FSDP over 8 ranks (a node's worth of groups).
      std::vector<std::pair<int, int>> splits = {{data, 1}};
      if (data > 1) splits.push_back({1, data});
      if (data > 8 && data % 8 == 0) splits.push_back({8, data / 8});
      for (auto [fsdp, dp] : splits) out.push_back({tp, pp, fsdp, dp, 1});
    }
  }
  return out;
}

std::string mesh_text(const Layout& l) {
  std::vector<std::string> parts;
  if (l.tp > 1) parts.push_back(fmt::format("tp{}", l.tp));
  if (l.cp > 1) parts.push_back(fmt::format("cp{}", l.cp));
  if (l.ep > 1) parts.push_back(fmt::format("ep{}", l.ep));
  if (l.fsdp > 1) parts.push_back(fmt::format("fsdp{}", l.fsdp));
  if (l.dp > 1) parts.push_back(fmt::format("dp{}", l.dp));
  if (l.pp > 1) parts.push_back(fmt::format("pp{}", l.pp));
  const std::string sp = l.tp > 1 && !l.sequence_parallel ? " (no SP)" : "";
  return parts.empty() ? "one GPU" : fmt::format("{}{}", fmt::join(parts, " x "), sp);
}

// Without sequence parallelism TP's regions are all-reduces, which some variants have no
// form of (async TP's decompositions): the scenario's variants that have one.
std::vector<std::string> variants_without_sp(const Scenario& candidate, const std::vector<std::string>& wanted) {
  std::vector<std::string> kept;
  for (const std::string& v : wanted)
    if (supports(candidate, v)) kept.push_back(v);
  return kept;
}

// One candidate configuration and what the ranking shows of it.
struct Candidate {
  Scenario scenario;
  Json workload;
  std::string mesh, schedule, checkpoint;
};

}  // namespace

Advice advise(const Json& scenario_json, const std::string& base_dir, unsigned jobs) {
  HardwareCache cache;
  const Scenario base = parse_scenario(scenario_json, base_dir, &cache);
  if (!is_training_step(base.workload)) throw InputError("$.workload.op: advise ranks meshes for a training_step");
  const TrainingStepSpec& t = base.workload.step;
  const std::int64_t sequences = t.local_batch * t.data_parallel();
  Advice advice;
  // Context and expert parallelism are kept as given (the sequence length and the experts
  // decide them); the rest is searched.
  const int cp = t.mesh.size(MeshDim::cp), ep = t.mesh.size(MeshDim::ep);
  std::vector<Layout> layouts_tried = layouts(static_cast<int>(base.gpus / cp / ep), base.hardware.fabric.gpus_per_node, t.model.layers);
  for (Layout& l : layouts_tried) l.cp = cp, l.ep = ep;
  // TP with and without sequence parallelism (all-reduces and replicated norms: less
  // traffic to overlap, more activation memory), unless the scenario says which; the form
  // without it is modelled for dense models without CP only.
  const bool try_sp = !scenario_json.at("workload").contains("sequence_parallel") && !t.model.is_moe() && cp == 1;
  if (try_sp) {
    const std::size_t n = layouts_tried.size();
    for (std::size_t i = 0; i < n; ++i)
      if (layouts_tried[i].tp > 1) {
        layouts_tried.push_back(layouts_tried[i]);
        layouts_tried.back().sequence_parallel = false;
      }
  }
  // Every configuration in order; parsed (and so checked against the model's shapes) below.
  struct Draft {
    Json doc;
    Candidate shown;
    bool sequence_parallel = true;
  };
  std::vector<Draft> drafts;
  const bool zero_bubble_fits = !t.compile;
  // Megatron-style checkpointing choices, and torchtitan's per-op policy where the scenario
  // runs it (its layers' other choices are the same kernels).
  std::vector<std::string> checkpoints = {"none", "selective", "full"};
  if (t.checkpoint == Checkpointing::selective_op) checkpoints.push_back("selective_op");
  for (const Layout& l : layouts_tried) {
    const int data = l.fsdp * l.dp * l.ep;
    if (sequences % data != 0) continue;
    const std::int64_t local = sequences / data;
    for (const std::string& ck : checkpoints) {
      std::vector<Json> schedules;
      if (l.pp == 1) {
        schedules.push_back(Json::object());
      } else {
        if (local >= l.pp) schedules.push_back({{"pp_schedule", "1f1b"}, {"microbatches", local}});
        if (local % l.pp == 0 && t.model.layers >= 2 * l.pp)
          schedules.push_back({{"pp_schedule", "interleaved_1f1b"}, {"virtual_stages", 2}, {"microbatches", local}});
        // PyTorch's zero-bubble schedules where the scenario lets them run (uncompiled, TP
        // keeping its gathered inputs): interleaved with one and two chunks per rank, ZBV, DualPipeV.
        if (zero_bubble_fits && (l.tp == 1 || t.tp_saves_gathered_input) && local >= l.pp && local % std::max<std::int64_t>(1, local / l.pp) == 0) {
          schedules.push_back({{"pp_schedule", "interleaved_zero_bubble"}, {"virtual_stages", 1}, {"microbatches", local}});
          if (t.model.layers >= 2 * l.pp) {
            schedules.push_back({{"pp_schedule", "interleaved_zero_bubble"}, {"virtual_stages", 2}, {"microbatches", local}});
            schedules.push_back({{"pp_schedule", "zbv_zero_bubble"}, {"virtual_stages", 2}, {"microbatches", local}});
            if (local >= 2 * l.pp) schedules.push_back({{"pp_schedule", "dualpipev"}, {"virtual_stages", 2}, {"microbatches", local}});
          }
        }
      }
      for (const Json& sched : schedules) {
        Draft d;
        d.doc = scenario_json;
        Json& w = d.doc["workload"];
        w["mesh"] = Json{{"tp", l.tp}, {"pp", l.pp}, {"fsdp", l.fsdp}, {"dp", l.dp}, {"cp", l.cp}, {"ep", l.ep}};
        w.erase("mesh_order");
        w.erase("pp_schedule");
        w.erase("virtual_stages");
        w.erase("microbatches");
        w["local_batch"] = local;
        w["activation_checkpoint"] = ck;
        if (try_sp && l.tp > 1) w["sequence_parallel"] = l.sequence_parallel;
        for (const auto& [k, v] : sched.items()) w[k] = v;
        // Without sequence parallelism the variants are checked on the parsed candidate.
        if (!l.sequence_parallel) d.doc.erase("variants");
        d.sequence_parallel = l.sequence_parallel;
        d.shown.workload = w;
        d.shown.mesh = mesh_text(l);
        d.shown.schedule = l.pp == 1 ? "-" : sched["pp_schedule"].get<std::string>();
        if (l.pp > 1 && sched["pp_schedule"] == "interleaved_zero_bubble") d.shown.schedule = fmt::format("zero_bubble v{}", sched["virtual_stages"].get<int>());
        d.shown.checkpoint = ck;
        drafts.push_back(std::move(d));
      }
    }
  }
  std::vector<std::optional<Scenario>> parsed(drafts.size());
  parallel_for(drafts.size(), jobs, [&](std::size_t i) {
    try {
      parsed[i] = parse_scenario(drafts[i].doc, base_dir, &cache);
    } catch (const InputError&) {
      // heads, layers or the batch do not divide this way: counted below
    }
  });
  std::vector<Candidate> candidates;
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    if (!parsed[i]) {
      ++advice.candidates;
      ++advice.invalid;
      continue;
    }
    Candidate c = std::move(drafts[i].shown);
    c.scenario = std::move(*parsed[i]);
    if (!drafts[i].sequence_parallel) {
      c.scenario.variants = variants_without_sp(c.scenario, base.variants);
      if (c.scenario.variants.empty()) continue;
    }
    ++advice.candidates;
    candidates.push_back(std::move(c));
  }
  // A layer's cost depends on few of the step's choices: simulated once per distinct set.
  const auto cost_key = [](const Scenario& s, const std::string& v) {
    const TrainingStepSpec& c = s.workload.step;
    return fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}", c.mesh.size(MeshDim::tp), c.microbatch_tokens(), checkpointing_name(c.checkpoint), v,
                       c.linear_dtype ? dtype_name(*c.linear_dtype) : "", c.compile, c.weights_gathered_in_fp8(), c.sequence_parallel,
                       c.splits_backward());
  };
  struct Job {
    std::size_t candidate;
    std::string variant, key;
  };
  std::vector<Job> runs;
  std::map<std::string, std::pair<std::size_t, std::string>> first_of_key;  // key -> (candidate, variant) that computes it
  for (std::size_t i = 0; i < candidates.size(); ++i)
    for (const std::string& v : candidates[i].scenario.variants) {
      runs.push_back({i, v, cost_key(candidates[i].scenario, v)});
      first_of_key.emplace(runs.back().key, std::make_pair(i, v));
    }
  std::vector<const std::pair<const std::string, std::pair<std::size_t, std::string>>*> keys;
  for (const auto& entry : first_of_key) keys.push_back(&entry);
  std::vector<LayerCosts> layer_costs(keys.size());
  parallel_for(keys.size(), jobs, [&](std::size_t k) {
    const auto& [candidate, variant] = keys[k]->second;
    layer_costs[k] = simulate_layer_costs(candidates[candidate].scenario, variant);
  });
  std::map<std::string, const LayerCosts*> costs;
  for (std::size_t k = 0; k < keys.size(); ++k) costs.emplace(keys[k]->first, &layer_costs[k]);
  advice.rows.resize(runs.size());
  parallel_for(runs.size(), jobs, [&](std::size_t r) {
    const Job& job = runs[r];
    const Candidate& c = candidates[job.candidate];
    const StepVariantRun run = run_step_variant(c.scenario, job.variant, *costs.at(job.key));
    AdviceRow& row = advice.rows[r];
    row.workload = c.workload;
    row.mesh = c.mesh;
    row.schedule = c.schedule;
    row.checkpoint = c.checkpoint;
    row.variant = job.variant;
    row.local_batch = c.scenario.workload.step.local_batch;
    row.microbatches = c.scenario.workload.step.microbatches;
    row.step_time = run.sim.makespan;
    row.tokens_per_s_per_gpu = run.tokens_per_s_per_gpu;
    row.mfu = run.mfu;
    row.peak_memory_bytes = run.peak_memory_bytes;
    row.oom = run.oom;
  });
  // Fitting first, then fastest; ties keep the order tried (deterministic).
  std::stable_sort(advice.rows.begin(), advice.rows.end(), [](const AdviceRow& a, const AdviceRow& b) {
    if (a.oom != b.oom) return !a.oom;
    return a.step_time < b.step_time;
  });
  return advice;
}

std::string format_advice(const Advice& a, const Scenario& base, int top) {
  const auto fitting = std::count_if(a.rows.begin(), a.rows.end(), [](const AdviceRow& r) { return !r.oom; });
  std::string out = fmt::format("{} on {} x {}, global batch {} sequences of {}: {} configurations x variants simulated, {} fit in memory"
                                " ({} meshes refused by the model's shapes)\n",
                                base.workload.step.model.name, base.gpus, base.hardware.name,
                                base.workload.step.local_batch * base.workload.step.data_parallel(), base.workload.step.seq_len,
                                a.rows.size(), fitting, a.invalid);
  out += fmt::format("{:>4}  {:<34} {:<17} {:<10} {:<22} {:>6} {:>4} {:>10} {:>12} {:>6} {:>9}\n", "rank", "mesh", "schedule",
                     "checkpoint", "variant", "batch", "mb", "step_ms", "tokens/s/GPU", "MFU%", "peak_GiB");
  int shown = 0;
  for (const auto& r : a.rows) {
    if (r.oom || shown >= top) break;
    ++shown;
    out += fmt::format("{:>4}  {:<34} {:<17} {:<10} {:<22} {:>6} {:>4} {:>10.1f} {:>12.0f} {:>6.1f} {:>9.1f}\n", shown, r.mesh, r.schedule,
                       r.checkpoint, r.variant, r.local_batch, r.microbatches, static_cast<double>(r.step_time) * 1e-9,
                       r.tokens_per_s_per_gpu, 100 * r.mfu, r.peak_memory_bytes / 1073741824.0);
  }
  if (fitting == 0) out += "nothing fits in memory: more GPUs, a smaller global batch, or a GPU with more memory\n";
  return out;
}

Json advice_json(const Advice& a, int top) {
  Json rows = Json::array();
  int shown = 0;
  for (const auto& r : a.rows) {
    if (shown++ >= top) break;
    rows.push_back({{"mesh", r.mesh}, {"schedule", r.schedule}, {"activation_checkpoint", r.checkpoint}, {"variant", r.variant},
                    {"local_batch", r.local_batch}, {"microbatches", r.microbatches},
                    {"step_time_ms", round_to(static_cast<double>(r.step_time) * 1e-9, 4)},
                    {"tokens_per_s_per_gpu", round_to(r.tokens_per_s_per_gpu, 2)}, {"mfu", round_to(r.mfu, 4)},
                    {"peak_memory_gib", round_to(r.peak_memory_bytes / 1073741824.0, 3)}, {"oom", r.oom},
                    {"workload", r.workload}});
  }
  return Json{{"candidates", a.candidates}, {"refused_by_model", a.invalid}, {"simulated", a.rows.size()}, {"ranked", rows}};
}

}  // namespace tpsim
