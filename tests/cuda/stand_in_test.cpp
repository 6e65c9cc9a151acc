// Stand-ins for ops the CUDA backend cannot run, on the CPU: which ops, for how
// long, and how a measured run that used them is written and read back.
#include "support/catch.hpp"

#include <set>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/analysis/metrics.hpp"
#include "tpsim/calibration/result_import.hpp"
#include "tpsim/cuda/measured_timeline.hpp"
#include "tpsim/cuda/stand_in.hpp"
#include "tpsim/report/result_writers.hpp"
#include "tpsim/io/workload_kinds.hpp"

using namespace tpsim;

namespace {

const char* kLayer = R"({"name": "layer", "hardware": "h100_sxm", "gpus": 2, "dtype": "bf16",
    "workload": {"op": "transformer_layer", "model": "llama3_8b", "tokens": 4096, "seq_len": 4096, "pass": "forward"},
    "variants": ["baseline", "async_tp"]})";

// A measured run of `sim` whose samples are the simulated times, 5% slower.
VariantRun measured_copy(const RunResult& sim, const VariantRun& run, const std::map<OpId, double>& stand_ins) {
  std::vector<std::vector<OpSample>> reps(1, std::vector<OpSample>(run.dag.size()));
  for (std::size_t i = 0; i < run.dag.size(); ++i)
    reps[0][i] = {run.timeline.ops[i].start * 1.05e-9, run.timeline.ops[i].end * 1.05e-9};
  Dag dag = build_dag(sim.scenario, run.variant);
  Timeline tl = measured_timeline(dag, reps, {132, 132}, stand_ins);
  VariantMetrics m = analyze(dag, tl);
  return VariantRun{run.variant, std::move(dag), std::move(tl), std::move(m)};
}

}  // namespace

TEST_CASE("Flash attention and the fused ring GEMM are the ops the GPU backend stands in for", "[cuda]") {
  const RunResult sim = test::simulate(kLayer);
  for (const VariantRun& run : sim.runs) {
    INFO(run.variant);
    int attention = 0;
    for (OpId id = 0; id < run.dag.size(); ++id) attention += std::holds_alternative<AttentionOp>(run.dag.op(id).payload);
    REQUIRE(attention == 2);  // one per rank
    const auto durations = stand_in_durations_us(run.dag, run.timeline);
    CHECK(durations.size() == 2u);
    for (const auto& [id, us] : durations) {
      CHECK(std::holds_alternative<AttentionOp>(run.dag.op(id).payload));
      CHECK(us == Approx(test::op_us(run.timeline, id)));
      CHECK(us > 10);  // 4096 tokens of causal attention, 16 heads per rank: tens of microseconds at least
    }
    CHECK_THAT(first_op_gpu_cannot_run(run.dag), Catch::Matchers::Contains("(attention)"));
  }
  const RunResult fused = test::simulate(R"({"hardware": "h100_sxm", "gpus": 4, "dtype": "fp16",
      "workload": {"op": "allgather_matmul", "m": 4096, "k": 4096, "n": 4096}, "variants": ["fused", "async_tp"]})");
  CHECK_THAT(first_op_gpu_cannot_run(fused.runs[0].dag), Catch::Matchers::Contains("(fused_gemm)"));
  CHECK(stand_in_durations_us(fused.runs[0].dag, fused.runs[0].timeline).size() == 4u);
  CHECK(first_op_gpu_cannot_run(fused.runs[1].dag).empty());
  CHECK(stand_in_durations_us(fused.runs[1].dag, fused.runs[1].timeline).empty());
  CHECK_THROWS_AS(stand_in_durations_us(fused.runs[0].dag, fused.runs[1].timeline), std::invalid_argument);
}

TEST_CASE("A measured run with stand-ins says so, and calibration learns only from the ops the GPU ran", "[cuda][measurement]") {
  const RunResult sim = test::simulate(kLayer);
  RunResult measured{sim.scenario, {}};
  std::size_t stand_in_total = 0;
  for (const VariantRun& run : sim.runs) {
    const auto stand_ins = stand_in_durations_us(run.dag, run.timeline);
    stand_in_total += stand_ins.size();
    measured.runs.push_back(measured_copy(sim, run, stand_ins));
  }
  Json j = result_json(measured);
  std::size_t ops_timed = 0;
  std::set<std::string> stood_in;  // "variant rankR:op"
  for (std::size_t i = 0; i < measured.runs.size(); ++i) {
    CHECK(j["results"][i]["stand_in_ops"] == 2);
    j["results"][i]["op_times"] = op_times_json(measured.runs[i]);
    int flagged = 0;
    for (const auto& op : j["results"][i]["op_times"]) {
      flagged += op.value("stand_in", false);
      ops_timed += op["end_us"].get<double>() > op["start_us"].get<double>() && !op.value("stand_in", false);
      if (!op.value("stand_in", false)) continue;
      CHECK(op["kind"] == "attention");
      stood_in.insert(fmt::format("layer {} rank{}:{}", measured.runs[i].variant, op["rank"].get<int>(), op["op"].get<std::string>()));
    }
    CHECK(flagged == 2);
  }
  const auto ms = import_result_json(j, "measured.json");
  // No makespan (it holds simulated time), no stand-in op: only the timed ops the GPU ran.
  CHECK(ms.size() == ops_timed);
  for (const auto& m : ms) {
    INFO(m.name);
    CHECK_FALSE(m.op.empty());
    CHECK_FALSE(stood_in.count(m.name));
  }
  CHECK(stand_in_total == 4u);
  CHECK(stood_in.size() == 4u);
  // A simulated result has no stand-ins and keeps its makespans.
  const Json plain = result_json(sim);
  CHECK_FALSE(plain["results"][0].contains("stand_in_ops"));
  CHECK(import_result_json(plain, "sim.json").size() == 2u);
}
