#include "support/catch.hpp"

#include <algorithm>

#include "tpsim/io/training_step_loader.hpp"
#include "tpsim/sweep/sweep_spec.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/sweep/sweep_table.hpp"

using namespace tpsim;

namespace {

const char* kBase = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
    "workload": {"op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584}})";

SweepSpec sweep(const std::string& axes) {
  return parse_sweep(std::string(R"({"base": )") + kBase + R"(, "axes": )" + axes + "}", "");
}

std::string error_of(const std::string& axes) {
  try {
    sweep(axes);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("Ranges expand by factor or by step, ends included", "[sweep]") {
  const auto s = sweep(R"({"workload.m": {"from": 1024, "to": 8192, "mul": 2}, "gpus": {"from": 2, "to": 8, "step": 3}})");
  REQUIRE(s.axes.size() == 2);
  CHECK(s.axes[0].values == std::vector<Json>{1024, 2048, 4096, 8192});
  CHECK(s.axes[1].values == std::vector<Json>{2, 5, 8});
  CHECK(s.points() == 12);
}

TEST_CASE("Ranges near the top of the 64-bit integers end instead of wrapping around", "[sweep]") {
  // Adding the step (or multiplying) past `to` used to overflow and loop for ever.
  const auto stepped = sweep(R"({"workload.m": {"from": 1, "to": 9000000000000000000, "step": 8000000000000000000}})");
  CHECK(stepped.axes[0].values == std::vector<Json>{1, 8000000000000000001});
  const auto multiplied = sweep(R"({"workload.m": {"from": 3, "to": 9000000000000000000, "mul": 1000000000}})");
  CHECK(multiplied.axes[0].values == std::vector<Json>{3, 3000000000, 3000000000000000000});
}

TEST_CASE("A key given twice in a sweep is refused with its JSON path", "[sweep]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of(R"({"workload.m": [1], "workload.m": [2]})"), Contains(R"($.axes: duplicate key "workload.m")"));
}

TEST_CASE("Points are the cross product in file order, the last axis fastest", "[sweep]") {
  const auto s = sweep(R"({"hardware": ["h100_sxm", "h200"], "workload.m": [1024, 2048, 4096]})");
  CHECK(s.values_of(0) == std::vector<Json>{"h100_sxm", 1024});
  CHECK(s.values_of(2) == std::vector<Json>{"h100_sxm", 4096});
  CHECK(s.values_of(3) == std::vector<Json>{"h200", 1024});
  const Json doc = s.scenario_of(5);
  CHECK(doc["hardware"] == "h200");
  CHECK(doc["workload"]["m"] == 4096);
  CHECK(doc["workload"]["k"] == 8192);  // untouched fields stay
}

TEST_CASE("The fingerprint changes with the points, not with formatting", "[sweep]") {
  CHECK(sweep(R"({"workload.m": [1, 2]})").fingerprint == sweep(R"({ "workload.m" : [1,2] })").fingerprint);
  CHECK(sweep(R"({"workload.m": [1, 2]})").fingerprint != sweep(R"({"workload.m": [1, 3]})").fingerprint);
}

TEST_CASE("Bad sweeps are rejected with the JSON path before any work", "[sweep]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of(R"({"workload.mm": [1]})"), Contains(R"($.axes["workload.mm"]: unknown scenario field "workload.mm" (did you mean "workload.m"?))"));
  CHECK_THAT(error_of(R"({"workload.m": {"from": 8, "to": 4, "mul": 2}})"), Contains("empty range: from 8 is past to 4"));
  CHECK_THAT(error_of(R"({"workload.m": []})"), Contains("empty list of values"));
  CHECK_THAT(error_of(R"({"workload.m": {"from": 1, "to": 1000000000000, "step": 1}})"), Contains("more than the 1000000 points"));
  CHECK_THAT(error_of(R"({"workload.m": {"from": 1, "to": 2000, "step": 1}, "workload.k": {"from": 1, "to": 2000, "step": 1}})"),
             Contains("the sweep would have more than 1000000 points"));
  CHECK_THAT(error_of(R"({"workload.m": {"from": 1, "to": 8}})"), Contains("a range needs \"mul\" or \"step\""));
  CHECK_THAT(error_of(R"({})"), Contains("$.axes: must be an object with at least one axis"));
}

TEST_CASE("CSV lines split with quoting", "[sweep]") {
  std::vector<std::string> f;
  REQUIRE(split_csv_line(R"(1,"a,b","say ""hi""",)", f));
  CHECK(f == std::vector<std::string>{"1", "a,b", "say \"hi\"", ""});
  CHECK_FALSE(split_csv_line(R"(1,"open)", f));
}

TEST_CASE("The Markdown table shows speedups per variant and marks the best", "[sweep]") {
  std::istringstream csv(
      "point,workload.m,variant,makespan_us,speedup_vs_baseline,exposed_comm_us,sm_utilization,link_utilization,best_variant\n"
      "0,1024,baseline,100.000,1.0000,1,0.5,0.5,baseline\n"
      "0,1024,async_tp,150.000,0.6667,1,0.5,0.5,baseline\n"
      "1,2048,baseline,200.000,1.0000,1,0.5,0.5,async_tp\n"
      "1,2048,async_tp,100.000,2.0000,1,0.5,0.5,async_tp\n");
  const std::string md = sweep_markdown(csv);
  CHECK_THAT(md, Catch::Matchers::Contains("| workload.m | async_tp speedup | best |"));
  CHECK_THAT(md, Catch::Matchers::Contains("| 1024 | 0.6667x | baseline |"));
  CHECK_THAT(md, Catch::Matchers::Contains("| 2048 | **2.0000x** | async_tp |"));
}

TEST_CASE("A sweep over training steps has step columns and may sweep the mesh", "[sweep][step]") {
  const std::string text = R"({"base": {"hardware": "h100_sxm", "gpus": 64, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 4, "mesh": {"fsdp": 8, "tp": 8},
                   "microbatches": 4}, "variants": ["baseline", "async_tp"]},
      "axes": {"workload.mesh": [{"fsdp": 8, "tp": 8}, {"fsdp": 4, "tp": 8, "pp": 2}]}})";
  const SweepSpec spec = parse_sweep(text, "");
  REQUIRE(is_training_sweep(spec));
  CHECK(sweep_csv_header(spec).find("step_time_ms,speedup_vs_baseline,tokens_per_s_per_gpu,mfu,peak_memory_gib,oom") !=
        std::string::npos);
  const Scenario s = parse_scenario(spec.scenario_of(1), "");
  CHECK(s.workload.step.mesh.size(MeshDim::pp) == 2);
  const std::string rows = sweep_step_csv_rows(spec, 1, run_training_step(s), "id");
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 2);
  CHECK(rows.find(",async_tp,") != std::string::npos);
  // Exposed time per mesh dimension, in ms, where the header says: this mesh has a pipeline
  // and FSDP and no CP, EP or DP.
  const auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    REQUIRE(split_csv_line(line, out));
    return out;
  };
  const auto header = cells(sweep_csv_header(spec).substr(0, sweep_csv_header(spec).size() - 1));
  const auto row = cells(rows.substr(0, rows.find('\n')));
  REQUIRE(row.size() == header.size());
  const auto at = [&](const std::string& column) {
    const auto it = std::find(header.begin(), header.end(), column);
    REQUIRE(it != header.end());
    return std::stod(row[static_cast<std::size_t>(it - header.begin())]);
  };
  CHECK(at("exposed_pp_ms") > 0);
  CHECK(at("exposed_fsdp_ms") >= 0);
  CHECK(at("exposed_cp_ms") == 0);
  CHECK(at("exposed_ep_ms") == 0);
  CHECK(at("exposed_dp_ms") == 0);
  CHECK(at("exposed_pp_ms") < at("step_time_ms"));
}

TEST_CASE("A training-step sweep may vary the loss, the element-wise kernels and an MLA model's ranks", "[sweep][step]") {
  const std::string text = R"({"base": {"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "seq_len": 4096, "local_batch": 1, "mesh": {"tp": 8}, "cross_entropy": "aten",
                   "model": {"hidden": 4096, "ffn_hidden": 11008, "heads": 32, "kv_heads": 32, "head_dim": 192, "layers": 2,
                             "vocab": 32000, "q_lora_rank": 1024, "kv_lora_rank": 512, "rope_head_dim": 64, "v_head_dim": 128}},
      "variants": ["baseline"]},
      "axes": {"workload.loss_parallel": [true, false], "workload.elementwise": ["fused", "aten"], "workload.model.kv_lora_rank": [256, 512]}})";
  const SweepSpec spec = parse_sweep(text, "");
  REQUIRE(spec.points() == 8);
  const Scenario last = parse_scenario(spec.scenario_of(7), "");
  CHECK_FALSE(last.workload.step.loss_parallel);
  CHECK(last.workload.step.aten_elementwise);
  CHECK(last.workload.step.model.mla.kv_lora_rank == 512);
  CHECK(parse_scenario(spec.scenario_of(0), "").workload.step.model.mla.kv_lora_rank == 256);
}

TEST_CASE("every key a training step takes can be a sweep axis", "[sweep]") {
  const std::vector<std::string> fields = sweepable_fields();
  for (const std::string& key : training_step_keys()) {
    INFO(key);
    CHECK(std::find(fields.begin(), fields.end(), "workload." + key) != fields.end());
  }
}
