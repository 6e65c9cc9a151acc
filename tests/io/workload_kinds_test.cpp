#include "support/catch.hpp"

#include <set>

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/io/workload_kinds.hpp"

using namespace tpsim;

namespace {

// The smallest workload object each kind accepts, as a user would write it.
std::string sample_workload(std::string_view kind) {
  if (kind == "matmul" || kind == "allgather_matmul" || kind == "matmul_reducescatter" || kind == "matmul_allreduce" ||
      kind == "alltoall_matmul")
    return fmt::format(R"({{"op": "{}", "m": 1024, "k": 512, "n": 256}})", kind);
  if (kind == "training_step")
    return R"({"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 1, "mesh": {"fsdp": 2, "tp": 4}})";
  return fmt::format(R"({{"op": "{}", "model": "llama3_8b", "tokens": 4096, "seq_len": 4096}})", kind);
}

Scenario sample_scenario(const WorkloadKind& kind) {
  const std::string text = fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {}}})", sample_workload(kind.name));
  return parse_scenario(Json::parse(text), "");
}

}  // namespace

TEST_CASE("Every workload kind is one complete table entry", "[io][workload_kinds]") {
  std::set<std::string> names;
  for (const WorkloadKind& kind : workload_kinds()) {
    INFO(kind.name);
    CHECK(names.insert(std::string(kind.name)).second);
    CHECK(find_workload_kind(kind.name) == &kind);
    CHECK_FALSE(kind.summary.empty());
    CHECK_FALSE(kind.variants(Workload{}).empty());
    CHECK(kind.min_gpus <= kind.max_gpus);
    // A kind is either one op DAG (with a builder) or a whole step (with its own simulator).
    CHECK((kind.build == nullptr) == kind.whole_step);
    REQUIRE(kind.parse != nullptr);
    REQUIRE(kind.check_hardware != nullptr);
    // Its sample parses, defaults to every variant, and (for a DAG kind) builds a graph on every rank.
    const Scenario s = sample_scenario(kind);
    CHECK(s.workload.op == kind.name);
    CHECK(s.variants == kind.variants(s.workload));
    CHECK(is_training_step(s.workload) == kind.whole_step);
    if (kind.whole_step) {
      CHECK_THROWS_AS(build_dag(s, s.variants.front()), std::logic_error);
      continue;
    }
    for (const std::string& v : s.variants) {
      const Dag dag = build_dag(s, v);
      CHECK(dag.ranks() == 8);
      for (int r = 0; r < dag.ranks(); ++r) CHECK_FALSE(dag.program(r).empty());
    }
  }
  CHECK(find_workload_kind("allgather_matmull") == nullptr);
}

TEST_CASE("A workload admits exactly its kind's keys", "[io][workload_kinds]") {
  for (const WorkloadKind& kind : workload_kinds()) {
    INFO(kind.name);
    Json w = Json::parse(sample_workload(kind.name));
    w["tokenz"] = 1;
    const Json scenario = {{"hardware", "h100_sxm"}, {"gpus", 8}, {"dtype", "bf16"}, {"workload", w}};
    CHECK_THROWS_WITH(parse_scenario(scenario, ""), Catch::Matchers::Contains("$.workload: unknown key \"tokenz\""));
    CHECK(workload_kind_named_in(w) == &kind);
  }
  CHECK(workload_kind_named_in(Json::parse(R"({"op": 3})")) == nullptr);
  CHECK(workload_kind_named_in(Json::array()) == nullptr);
}

TEST_CASE("Each kind's GPU range is enforced before its keys are read", "[io][workload_kinds]") {
  for (const WorkloadKind& kind : workload_kinds()) {
    if (kind.min_gpus < 2) continue;
    INFO(kind.name);
    const Json scenario = {{"hardware", "h100_sxm"}, {"gpus", 1}, {"dtype", "bf16"}, {"workload", Json::parse(sample_workload(kind.name))}};
    CHECK_THROWS_WITH(parse_scenario(scenario, ""),
                      Catch::Matchers::Contains(fmt::format("$.gpus: {} needs at least {} GPUs", kind.name, kind.min_gpus)));
  }
}

TEST_CASE("tpsim workloads describes every kind with its keys and variants", "[io][workload_kinds]") {
  const std::string text = describe_workloads();
  for (const WorkloadKind& kind : workload_kinds()) {
    CHECK_THAT(text, Catch::Matchers::Contains(std::string(kind.name) + "\n  " + std::string(kind.summary)));
    for (const std::string& key : kind.keys) CHECK_THAT(text, Catch::Matchers::Contains(key));
  }
}
