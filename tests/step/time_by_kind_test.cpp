#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/time_by_kind.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

Tick kind_of(const std::vector<std::pair<std::string, Tick>>& parts, const std::string& kind) {
  for (const auto& [k, t] : parts)
    if (k == kind) return t;
  return 0;
}

StepResult step(const std::string& workload, const std::string& variants = R"(["baseline", "async_tp"])", int gpus = 16) {
  return run_training_step(parse_scenario(
      Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16", "variants": {}, "workload": {}}})", gpus, variants, workload)),
      ""));
}

}  // namespace

TEST_CASE("A split by kind scales to its total exactly and keeps the proportions", "[step][kinds]") {
  const TimeByKind shares{{"gemm", 600}, {"attention", 300}, {"launch", 100}};
  const TimeByKind t = scaled_to(shares, 1001);
  CHECK(total(t) == 1001);
  CHECK(t.at("gemm") == 601);  // the remainder goes to the largest
  CHECK(t.at("attention") == 300);
  CHECK(t.at("launch") == 100);
  CHECK(scaled_to({}, 50) == TimeByKind{{"other", 50}});
  CHECK(scaled_to(shares, 0).empty());
  // Adding keeps every picosecond and drops nothing but zeros.
  const TimeByKind sum = shares + TimeByKind{{"gemm", 1}, {"fsdp copies", 0}, {"optimizer", 7}};
  CHECK(total(sum) == total(shares) + 8);
  CHECK(sum.count("fsdp copies") == 0);
}

TEST_CASE("A step's compute time by kind adds up to the compute time, for every stage and variant", "[step][kinds]") {
  const std::vector<std::string> workloads = {
      // FSDP x TP
      R"({"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 2, "mesh": {"fsdp": 2, "tp": 8}})",
      // with a pipeline and full recomputation
      R"({"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 4, "mesh": {"pp": 2, "tp": 8},
          "pp_schedule": "1f1b", "microbatches": 4, "activation_checkpoint": "full"})",
      // with context parallelism
      R"({"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"cp": 2, "tp": 8}})"};
  for (const auto& w : workloads) {
    const StepResult r = step(w);
    for (const auto& run : r.runs)
      for (const auto& st : run.sim.stages) {
        INFO(w << " " << run.variant);
        Tick sum = 0;
        for (const auto& [kind, t] : st.busy_by_kind) sum += t;
        CHECK(sum == st.compute_busy);
        CHECK(kind_of(st.busy_by_kind, "gemm") > 0);
        CHECK(kind_of(st.busy_by_kind, "attention") > 0);
      }
  }
  // A MoE model's layers: its all-to-alls and routed experts show.
  const StepResult moe = step(R"({"op": "training_step", "seq_len": 4096, "local_batch": 1, "mesh": {"ep": 8},
                                  "model": {"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 4,
                                            "vocab": 32000, "experts": 8, "top_k": 2, "expert_ffn_hidden": 4096}})",
                              R"(["baseline"])", 8);
  const auto& st = moe.runs.front().sim.stages.front();
  CHECK(kind_of(st.busy_by_kind, "ep all-to-all") > 0);
  CHECK(kind_of(st.busy_by_kind, "routed experts") > 0);
}

TEST_CASE("Async TP's step spends less of its time in exposed TP collectives than the baseline's, and some in copies", "[step][kinds]") {
  const StepResult r = step(R"({"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {"fsdp": 2, "tp": 8}})");
  REQUIRE(r.runs.size() == 2);
  const auto& base = r.runs[0].sim.stages.front().busy_by_kind;
  const auto& async = r.runs[1].sim.stages.front().busy_by_kind;
  CHECK(kind_of(base, "tp collectives") > 0);
  CHECK(kind_of(async, "tp collectives") < kind_of(base, "tp collectives") / 2);
  // What it has instead on its critical path: the copy-engine copies of the shards, which the
  // baseline has none of.
  CHECK(kind_of(async, "tp copies") > 0);
  CHECK(kind_of(base, "tp copies") == 0);
}
