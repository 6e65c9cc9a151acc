// Result assembly of measured runs, on the CPU: medians over repeats, checks on the samples.
#include "support/catch.hpp"

#include <algorithm>

#include <set>

#include "support/simulate.hpp"
#include "tpsim/analysis/metrics.hpp"
#include "tpsim/app/side_by_side.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/microbench_plan.hpp"
#include "tpsim/cuda/launch_plan.hpp"
#include "tpsim/cuda/measured_timeline.hpp"
#include "tpsim/report/chrome_trace.hpp"
#include "tpsim/report/result_writers.hpp"
#include "tpsim/io/workload_kinds.hpp"

using namespace tpsim;

namespace {

Dag two_ops() {
  Dag dag(1);
  dag.add(0, 0, "a", GemmOp{{128, 128, 128, Dtype::bf16}});
  dag.add(0, 0, "b", ElementwiseOp{1e6, 1e6});
  return dag;
}

}  // namespace

TEST_CASE("A measured timeline takes each op's median start and end over the repeats", "[cuda]") {
  const Dag dag = two_ops();
  const std::vector<std::vector<OpSample>> reps = {
      {{0.010, 0.050}, {0.050, 0.070}}, {{0.011, 0.090}, {0.090, 0.100}}, {{0.009, 0.051}, {0.051, 0.072}}};
  const Timeline tl = measured_timeline(dag, reps, {132});
  CHECK(tl.ops[0].start == 10'000'000);  // 0.010 ms in ps
  CHECK(tl.ops[0].end == 51'000'000);    // the outlier repeat does not move the median
  CHECK(tl.ops[1].end == 72'000'000);
  const VariantMetrics m = analyze(dag, tl);
  CHECK(to_us(m.makespan) == Approx(62));
  CHECK(median_span_us(reps, 1, false) == Approx(20));  // spans 20, 10, 21 us
  CHECK(median_span_us(reps, 1, true) == Approx(72));
}

TEST_CASE("Samples that cannot be a run are refused", "[cuda]") {
  const Dag dag = two_ops();
  CHECK_THROWS_AS(measured_timeline(dag, {}, {132}), std::invalid_argument);
  CHECK_THROWS_AS(measured_timeline(dag, {{{0, 1}}}, {132}), std::invalid_argument);
  CHECK_THROWS_AS(measured_timeline(dag, {{{0, 1}, {2, 1}}}, {132}), std::invalid_argument);
  CHECK_THROWS_AS(measured_timeline(dag, {{{-1, 1}, {2, 3}}}, {132}), std::invalid_argument);
}

TEST_CASE("Every microbench measurement lowers to a launch plan and has a prediction", "[cuda][measurement]") {
  for (int gpus : {1, 8}) {
    const auto ms = microbench_measurements(gpus, Dtype::bf16);
    std::set<std::string> classes;
    for (const auto& m : ms) {
      INFO(m.name);
      const MeasurementDag md = measurement_dag(m);
      const LaunchPlan plan = plan_launches(md.dag);
      CHECK(static_cast<int>(plan.ranks.size()) == md.dag.ranks());
      CHECK(md.dag.ranks() <= gpus);
      CHECK(predict_us(m, test::h100()) > 0);
      classes.insert(std::string(measurement_class(m.kind)));
    }
    if (gpus == 8) {
      // The two halves gathering at once: each half in a communicator of its own.
      const auto both = std::find_if(ms.begin(), ms.end(), [](const Measurement& m) { return m.groups == 2; });
      REQUIRE(both != ms.end());
      const LaunchPlan plan = plan_launches(measurement_dag(*both).dag);
      CHECK(plan.uses_nccl == std::vector<bool>{false, true, true});
    }
    // One GPU: GEMMs (alone and two on two streams), local copies, the launch.
    if (gpus == 1) CHECK(classes == std::set<std::string>{"gemm", "copy", "launch", "interference"});
    else CHECK(classes == std::set<std::string>{"gemm", "copy", "launch", "collective", "barrier", "interference"});
  }
}

TEST_CASE("A measured run is written as the same result JSON and Chrome trace as a simulated one", "[cuda]") {
  const RunResult simulated = test::simulate(R"({"name": "m", "hardware": "h100_sxm", "gpus": 2, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 2048, "k": 1024, "n": 1024}, "variants": ["async_tp"]})");
  const VariantRun& sim = simulated.runs.front();
  // Samples as the GPU would report them: here the simulated times, in ms, with jitter between repeats.
  std::vector<std::vector<OpSample>> reps(3, std::vector<OpSample>(sim.dag.size()));
  for (std::size_t r = 0; r < reps.size(); ++r)
    for (std::size_t i = 0; i < sim.dag.size(); ++i)
      reps[r][i] = {sim.timeline.ops[i].start * 1e-9 * (1 + 0.01 * r), sim.timeline.ops[i].end * 1e-9 * (1 + 0.01 * r)};
  Dag dag = build_dag(simulated.scenario, "async_tp");
  Timeline tl = measured_timeline(dag, reps, {132, 132});
  VariantMetrics m = analyze(dag, tl);
  RunResult measured{simulated.scenario, {}};
  measured.runs.push_back(VariantRun{"async_tp", std::move(dag), std::move(tl), std::move(m)});
  const Json j = result_json(measured);
  CHECK(j["results"][0]["makespan_us"].get<double>() == Approx(test::makespan_us(simulated, "async_tp") * 1.01).epsilon(1e-3));
  CHECK(j["results"][0]["sm_utilization"].is_null());  // not measured: null, not a zero that reads as idle SMs
  CHECK(j["results"][0]["link_utilization"].is_null());
  const Json trace = chrome_trace(measured);
  CHECK(trace.dump() != "null");
  std::size_t slices = 0;
  for (const auto& e : trace["traceEvents"]) slices += e.value("ph", "") == "X";
  CHECK(slices >= sim.dag.size() / 2);
}

TEST_CASE("Measured and simulated runs pair up in one trace and one comparison table", "[cuda]") {
  const RunResult sim = test::simulate(R"({"name": "m", "hardware": "h100_sxm", "gpus": 2, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 2048, "k": 1024, "n": 1024}, "variants": ["baseline", "async_tp"]})");
  RunResult measured{sim.scenario, {}};
  for (const VariantRun& run : sim.runs) {
    // "Measured" 10% slower than simulated.
    std::vector<std::vector<OpSample>> reps(1, std::vector<OpSample>(run.dag.size()));
    for (std::size_t i = 0; i < run.dag.size(); ++i)
      reps[0][i] = {run.timeline.ops[i].start * 1.1e-9, run.timeline.ops[i].end * 1.1e-9};
    Dag dag = build_dag(sim.scenario, run.variant);
    Timeline tl = measured_timeline(dag, reps, {132, 132});
    VariantMetrics m = analyze(dag, tl);
    measured.runs.push_back(VariantRun{run.variant, std::move(dag), std::move(tl), std::move(m)});
  }
  const std::string table = format_comparison(measured, sim);
  CHECK_THAT(table, Catch::Matchers::Contains("-9.1%"));  // simulated = measured / 1.1
  // Kind by kind too: every kind's device time is 10% longer measured.
  for (const char* row : {"async_tp               gemm", "async_tp               copy", "baseline               collective"}) {
    const auto at = table.find(row);
    REQUIRE(at != std::string::npos);
    CHECK(table.substr(at, table.find('\n', at) - at).ends_with("-9.1%"));
  }
  CHECK_THROWS_AS(format_comparison(RunResult{sim.scenario, {}}, sim), std::invalid_argument);
  const RunResult both = side_by_side(std::move(measured), test::simulate(R"({"name": "m", "hardware": "h100_sxm", "gpus": 2,
      "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 2048, "k": 1024, "n": 1024}, "variants": ["baseline", "async_tp"]})"));
  REQUIRE(both.runs.size() == 4);
  CHECK(both.runs[0].variant == "baseline measured");
  CHECK(both.runs[1].variant == "baseline simulated");
  const Json trace = chrome_trace(both);
  std::set<std::string> processes;
  for (const auto& e : trace["traceEvents"])
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") processes.insert(e["args"]["name"].get<std::string>());
  CHECK(processes.size() == 8);  // 2 variants x measured/simulated x 2 GPUs
}
