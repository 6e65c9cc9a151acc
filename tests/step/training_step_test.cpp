#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/report/step_result_writers.hpp"
#include "tpsim/report/step_trace.hpp"
#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

std::string step(int gpus, const std::string& model, const std::string& mesh, const std::string& extra = "",
                 const std::string& variants = R"("baseline")", const std::string& hw = "h100_sxm") {
  return fmt::format(R"({{"hardware": "{}", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "{}", "seq_len": 8192, "local_batch": 2, "mesh": {{{}}}{}}},
      "variants": [{}]}})",
                     hw, gpus, model, mesh, extra.empty() ? "" : ", " + extra, variants);
}

StepResult run(const std::string& json) { return run_training_step(parse_scenario(Json::parse(json), "")); }

}  // namespace

TEST_CASE("bad meshes and schedules are one line naming the JSON path", "[step][input]") {
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 4, "tp": 8)")).find("$.workload.mesh") != std::string::npos);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 4, "tp": 8)")).find("32 GPUs, but gpus is 64") != std::string::npos);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 2, "tp": 8, "ep": 4)")).find("$.workload.mesh.ep") != std::string::npos);
  CHECK(test::scenario_error(step(48, "llama3_8b", R"("fsdp": 8, "tp": 6)")).find("$.workload.model.heads") != std::string::npos);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("pp": 4, "tp": 8, "fsdp": 2)", R"("pp_schedule": "interleaved_1f1b", "microbatches": 2)"))
            .find("$.workload.microbatches") != std::string::npos);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("pp": 4, "tp": 8, "fsdp": 2)", R"("pp_schedule": "1f1b", "microbatches": 2)"))
            .find("at least pp = 4 microbatches") != std::string::npos);
  // Microbatches left to their default (pp's degree) that the local batch of 2 cannot give: the
  // line says the default was taken and points at the local batch.
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("pp": 4, "tp": 8, "fsdp": 2)")) ==
        "$.workload.local_batch: 2 sequences do not split into pp = 4 microbatches (the default): give a local batch they divide, or "
        "\"microbatches\"");
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("mesh_order": ["tp", "fsdpp"])")).find("did you mean \"fsdp\"") !=
        std::string::npos);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("mesh_order": ["tp"])")).find("does not place \"fsdp\"") !=
        std::string::npos);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("linear_dtype": "int4")")).find("$.workload.linear_dtype") !=
        std::string::npos);
  // TP across nodes runs over the NICs, without the variants that map peers' memory over NVLink.
  CHECK(test::scenario_error(step(16, "llama3_8b", R"("fsdp": 1, "tp": 16)", "", R"("baseline", "async_tp")"))
            .find("$.variants[1]: async_tp maps its peers' memory over NVLink, so its group must sit in one node; each TP group spans 2 nodes") !=
        std::string::npos);
  // Across nodes a cluster network is needed: h100_pcie describes none.
  CHECK(test::scenario_error(step(16, "llama3_8b", R"("fsdp": 8, "tp": 2)", "", R"("baseline")", "h100_pcie")).find("cluster") != std::string::npos);
}

TEST_CASE("a model too big for its mesh is reported out of memory, not refused", "[step][memory]") {
  const StepResult r = run(step(8, "llama3_405b", R"("fsdp": 8)"));
  REQUIRE(r.runs.size() == 1);
  CHECK(r.runs[0].oom);
  CHECK(r.runs[0].peak_memory_bytes > r.scenario.hardware.memory.capacity_bytes);
  const Json j = step_result_json(r);
  CHECK(j["results"][0]["oom"] == true);
  const StepResult fits = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)"));
  CHECK_FALSE(fits.runs[0].oom);
}

TEST_CASE("FSDP shards parameters, gradients and optimizer state: 16 bytes per parameter over tp x fsdp", "[step][memory]") {
  const StepResult r = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)"));
  const auto& t = r.scenario.workload.step;
  const double params = t.model.layers * t.model.layer_params() + 2 * t.model.embedding_params();
  double states = 0;
  for (const auto& [kind, b] : r.runs[0].memory[0].parts)
    if (kind == "parameters (fp32 shard)" || kind == "gradients (fp32 shard)" || kind == "optimizer state (AdamW moments)") states += b;
  CHECK(states == Approx(16 * params / 64));
}

TEST_CASE("FSDP all-gathers each layer's bf16 weights and reduce-scatters its fp32 gradient", "[step][fsdp]") {
  const StepResult r = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)"));
  const auto& t = r.scenario.workload.step;
  int gathers = 0, reduces = 0;
  for (const auto& c : r.runs[0].plan.collectives) {
    if (c.op == "all_gather") {
      CHECK(c.bytes == Approx(2 * t.model.layer_params() / 8));
      ++gathers;
    }
    if (c.op == "reduce_scatter") {
      CHECK(c.bytes == Approx(4 * t.model.layer_params() / 8));
      ++reduces;
    }
  }
  CHECK(gathers == 1);
  CHECK(reduces == 1);
  // Without a pipeline: gathered before each forward and each backward, reduced once per layer.
  int ag = 0, rs = 0;
  for (const auto& task : r.runs[0].plan.program.tasks) {
    ag += task.name.starts_with("fsdp.all_gather");
    rs += task.name.starts_with("fsdp.reduce_scatter");
  }
  CHECK(ag == 2 * t.model.layers);
  CHECK(rs == t.model.layers);
}

TEST_CASE("doubling data parallelism at a fixed local batch keeps tokens/s per GPU", "[step][scaling]") {
  const StepResult a = run(step(128, "llama3_8b", R"("fsdp": 16, "tp": 8)"));
  const StepResult b = run(step(256, "llama3_8b", R"("fsdp": 32, "tp": 8)"));
  const double ta = a.runs[0].tokens_per_s_per_gpu, tb = b.runs[0].tokens_per_s_per_gpu;
  INFO(fmt::format("{:.0f} vs {:.0f} tokens/s/GPU", ta, tb));
  // A ring's bytes per rank grow only as (n-1)/n: within a few percent.
  CHECK(tb <= ta * 1.0001);
  CHECK(tb > 0.95 * ta);
}

TEST_CASE("full checkpointing trades time for memory", "[step][checkpoint]") {
  const StepResult none = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("activation_checkpoint": "none")"));
  const StepResult full = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("activation_checkpoint": "full")"));
  const StepResult sel = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("activation_checkpoint": "selective")"));
  CHECK(full.runs[0].sim.makespan > none.runs[0].sim.makespan);
  CHECK(sel.runs[0].sim.makespan > none.runs[0].sim.makespan);
  CHECK(sel.runs[0].sim.makespan < full.runs[0].sim.makespan);
  CHECK(full.runs[0].peak_memory_bytes < sel.runs[0].peak_memory_bytes);
  CHECK(sel.runs[0].peak_memory_bytes < none.runs[0].peak_memory_bytes);
  // Full recomputation re-runs each layer's forward inside its backward.
  CHECK(full.runs[0].costs.recompute == full.runs[0].costs.forward);
}

TEST_CASE("a pipeline's bubble shrinks with more microbatches and comes from the schedule", "[step][pipeline]") {
  const auto with_batch = [](int m, const std::string& sched) {
    const std::string j = fmt::format(R"({{"hardware": "h100_sxm", "gpus": 64, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 16, "mesh": {{"pp": 4, "tp": 8, "fsdp": 2}},
                   "microbatches": {}, "pp_schedule": "{}"}}, "variants": ["baseline"]}})",
                                      m, sched);
    return run(j).runs[0];
  };
  const auto m4 = with_batch(4, "1f1b"), m16 = with_batch(16, "1f1b");
  CHECK(m16.bubble_fraction < m4.bubble_fraction);
  // With real stages (embedding on the first, output layer on the last) the bubble is at least the ideal one.
  CHECK(m4.bubble_fraction > 0.9 * 3.0 / (4 + 3));
  const auto inter = with_batch(16, "interleaved_1f1b");
  CHECK(inter.bubble_fraction < m16.bubble_fraction);
}

TEST_CASE("async TP hides TP communication inside a training step", "[step][variants]") {
  const StepResult r = run(step(64, "llama3_70b", R"("fsdp": 8, "tp": 8)", "", R"("baseline", "async_tp")"));
  REQUIRE(r.runs.size() == 2);
  CHECK(r.runs[1].exposed_comm.at("tp") < r.runs[0].exposed_comm.at("tp") / 2);
  CHECK(r.runs[1].costs.forward < r.runs[0].costs.forward);
}

TEST_CASE("the same training step gives byte-identical results", "[step][determinism]") {
  const std::string j = step(512, "llama3_70b", R"("fsdp": 32, "tp": 8, "pp": 2)", R"("microbatches": 2, "pp_schedule": "interleaved_1f1b")");
  CHECK(step_result_json(run(j)).dump() == step_result_json(run(j)).dump());
}

TEST_CASE("fp8 linears run their GEMMs faster and pay for the casts they add", "[step][fp8]") {
  const StepResult bf16 = run(step(64, "llama3_70b", R"("fsdp": 8, "tp": 8)"));
  const StepResult fp8 = run(step(64, "llama3_70b", R"("fsdp": 8, "tp": 8)", R"("linear_dtype": "fp8")"));
  CHECK(fp8.runs[0].costs.forward < bf16.runs[0].costs.forward);
  // Attention, norms and communication stay: far from the 2x of the GEMMs alone.
  CHECK(fp8.runs[0].costs.forward > 0.5 * bf16.runs[0].costs.forward);
  // Compiled, a tensor-wise cast still reads its input twice (its amax, then the cast): fp8
  // gains under compile too, and by about what it gains eager (one kernel's start-up more a
  // cast, and compile's fusions elsewhere, apart).
  const StepResult fused = run(step(64, "llama3_70b", R"("fsdp": 8, "tp": 8)", R"("linear_dtype": "fp8", "compile": true)"));
  const StepResult compiled = run(step(64, "llama3_70b", R"("fsdp": 8, "tp": 8)", R"("compile": true)"));
  const double gain_compiled = static_cast<double>(compiled.runs[0].costs.forward - fused.runs[0].costs.forward);
  const double gain_eager = static_cast<double>(bf16.runs[0].costs.forward - fp8.runs[0].costs.forward);
  CHECK(gain_compiled > 0);
  CHECK(gain_compiled == Approx(gain_eager).epsilon(0.02));
  // A100 has no fp8 math.
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("linear_dtype": "fp8")", R"("baseline")", "a100_sxm"))
            .find("$.workload.linear_dtype") != std::string::npos);
}

TEST_CASE("compile fuses each residual add with the next norm: fewer passes, same FLOPs", "[step][compile]") {
  const StepResult eager = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("elementwise": "aten")"));
  const StepResult compiled = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("compile": true)"));
  CHECK(compiled.runs[0].costs.forward < eager.runs[0].costs.forward);
  CHECK(compiled.model_flops == eager.model_flops);
}

TEST_CASE("without a pipeline, microbatches and a schedule are noted and not applied", "[step][input]") {
  const Scenario s = parse_scenario(Json::parse(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("microbatches": 16)")), "");
  CHECK(s.workload.step.microbatches == 1);
  bool noted = false;
  for (const auto& n : s.notes) noted |= n.find("microbatches") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("a GELU model has two FFN matrices where SwiGLU has three", "[step][model]") {
  const std::string gelu = R"({"hardware": "a100_sxm", "gpus": 8, "dtype": "fp16",
      "workload": {"op": "training_step", "seq_len": 2048, "local_batch": 1, "mesh": {"tp": 8},
                   "model": {"hidden": 4096, "ffn_hidden": 16384, "heads": 32, "kv_heads": 32, "head_dim": 128,
                             "layers": 4, "vocab": 51200, "ffn_activation": "gelu"}}, "variants": ["baseline"]})";
  const Scenario s = parse_scenario(Json::parse(gelu), "");
  const double h = 4096, f = 16384;
  CHECK(s.workload.step.model.layer_params() == Approx(4 * h * h + 2 * h * f + 2 * h));
  const StepResult r = run_training_step(s);
  CHECK(r.runs[0].sim.makespan > 0);
}

TEST_CASE("the step's trace names every collective by its mesh dimension, per stage and stream", "[step][trace]") {
  const StepResult r = run(step(64, "llama3_8b", R"("pp": 2, "tp": 8, "fsdp": 2, "dp": 2)", R"("microbatches": 2)"));
  const Json trace = step_trace(r);
  std::map<std::string, int> by_cat;
  bool nic_counter = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++by_cat[e["cat"].get<std::string>()];
      const std::string name = e["name"];
      if (e["cat"] != "compute") CHECK(name.starts_with(e["cat"].get<std::string>() + "."));
      CHECK(e["dur"].get<double>() >= 0);
    }
    if (e["ph"] == "C" && e["args"]["NIC"].get<double>() > 0) nic_counter = true;
  }
  CHECK(by_cat["compute"] > 0);
  CHECK(by_cat["fsdp"] > 0);
  CHECK(by_cat["dp"] > 0);
  CHECK(by_cat["pp"] > 0);
  CHECK(nic_counter);
  std::size_t tasks = r.runs[0].plan.program.tasks.size();
  CHECK(static_cast<std::size_t>(by_cat["compute"] + by_cat["fsdp"] + by_cat["dp"] + by_cat["pp"]) == tasks);
}

TEST_CASE("seed 003's 2^6 mesh: every stage's trace shows the collectives of all six dimensions", "[step][trace][seed003]") {
  const StepResult r = run_training_step(load_scenario_file(std::string(TPSIM_SOURCE_DIR) + "/scenarios/seed003_mesh_2x6.json"));
  const Json trace = step_trace(r);
  std::map<std::pair<int, std::string>, int> by_stage;  // (pid, mesh dimension) -> events
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] != "compute") {
      const std::string cat = e["cat"];
      CHECK(e["name"].get<std::string>().starts_with(cat + "."));
      ++by_stage[{e["pid"].get<int>(), cat}];
    }
  for (int stage = 0; stage < 2; ++stage)
    for (const char* dim : {"tp", "cp", "ep", "fsdp", "dp", "pp"}) {
      INFO("stage " << stage << " " << dim);
      CHECK(by_stage[{stage, dim}] > 0);
    }
}

TEST_CASE("a mesh whose sizes multiply past 64 bits is refused without overflowing", "[step][input]") {
  const std::string e = test::scenario_error(step(64, "llama3_8b", R"("dp": 131072, "fsdp": 131072, "tp": 131072, "pp": 131072)"));
  CHECK(e.find("$.workload.mesh") != std::string::npos);
  CHECK(e.find("more than 131072 GPUs") != std::string::npos);
}

TEST_CASE("Without sequence parallelism hidden activations are whole per TP rank", "[step][memory][sequence_parallel]") {
  const auto parse_step = [](const std::string& extra) {
    return parse_scenario(Json::parse(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", extra)), "").workload.step;
  };
  const TrainingStepSpec sp = parse_step(""), no_sp = parse_step(R"("sequence_parallel": false)");
  CHECK(sp.sequence_parallel);
  CHECK_FALSE(no_sp.sequence_parallel);
  // Full checkpointing keeps only each layer's input: [T/t, H] with SP, [T, H] without.
  CHECK(activation_bytes_per_layer(no_sp, Checkpointing::full, 2) == Approx(8 * activation_bytes_per_layer(sp, Checkpointing::full, 2)));
  // Without checkpointing the four hidden-sized tensors grow t-fold; the rest is sharded as before.
  const double h = static_cast<double>(sp.model.hidden), tokens = static_cast<double>(sp.rank_tokens());
  CHECK(activation_bytes_per_layer(no_sp, Checkpointing::none, 2) - activation_bytes_per_layer(sp, Checkpointing::none, 2) ==
        Approx(tokens * 4 * h * (1 - 1.0 / 8) * 2));
  // The step: more memory, and async TP refused (its regions need sequence parallelism).
  const StepResult with = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)")),
                   without = run(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("sequence_parallel": false)"));
  CHECK(without.runs[0].peak_memory_bytes > with.runs[0].peak_memory_bytes);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("sequence_parallel": false)", R"("async_tp")"))
            .find("without sequence parallelism") != std::string::npos);
}

TEST_CASE("Sequence parallelism off is refused where its form is not modelled", "[step][input][sequence_parallel]") {
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 4, "tp": 8, "cp": 2)", R"("sequence_parallel": false)"))
            .find("$.workload.sequence_parallel: false is modelled for dense models without context parallelism only (cp > 1)") !=
        std::string::npos);
  CHECK(test::scenario_error(step(64, "llama3_8b", R"("fsdp": 8, "tp": 8)", R"("sequence_parallel": "no")"))
            .find("$.workload.sequence_parallel") != std::string::npos);
}

TEST_CASE("A TP group across two nodes pays the NICs: slower than inside one node", "[step][tp_across_nodes]") {
  // The same 16-GPU mesh, TP 8 inside a node (fsdp across) or spread over both nodes by fsdp placed inside it.
  const StepResult inside = run(step(16, "llama3_8b", R"("fsdp": 2, "tp": 8)", R"("mesh_order": ["tp", "fsdp"])"));
  const StepResult across = run(step(16, "llama3_8b", R"("fsdp": 2, "tp": 8)", R"("mesh_order": ["fsdp", "tp"])"));
  // Four members a node leave through four NICs (4 x 47 GB/s) where inside one node each
  // has its NVLink port (359 GB/s of NCCL payload): about half the rate.
  CHECK(across.runs[0].exposed("tp") > 1.5 * inside.runs[0].exposed("tp"));
  CHECK(across.runs[0].tokens_per_s_per_gpu < inside.runs[0].tokens_per_s_per_gpu);
  // By default the NVLink-only variants are left out, with a note.
  const Scenario s = parse_scenario(Json::parse(step(16, "llama3_8b", R"("fsdp": 1, "tp": 16)", "", R"("baseline", "ring")")), "");
  CHECK(s.variants == std::vector<std::string>{"baseline", "ring"});
  std::string text = step(16, "llama3_8b", R"("fsdp": 1, "tp": 16)");
  const std::string listed = R"(,
      "variants": ["baseline"])";
  REQUIRE(text.find(listed) != std::string::npos);
  text.erase(text.find(listed), listed.size());
  const Scenario defaults = parse_scenario(Json::parse(text), "");
  CHECK(std::find(defaults.variants.begin(), defaults.variants.end(), "async_tp") == defaults.variants.end());
  CHECK(std::find(defaults.variants.begin(), defaults.variants.end(), "async_tp_nccl") != defaults.variants.end());
}
