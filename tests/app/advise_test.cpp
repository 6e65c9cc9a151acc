#include "support/catch.hpp"

#include <set>
#include <string>

#include "tpsim/app/advise.hpp"
#include "tpsim/io/scenario.hpp"

using namespace tpsim;

TEST_CASE("advise ranks what fits, fastest first, and each row re-simulates to its time", "[step][advise]") {
  const Json doc = Json::parse(R"({"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16", "variants": ["baseline", "async_tp"],
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 2, "mesh": {"fsdp": 2, "tp": 8}}})");
  const Advice a = advise(doc, "");
  REQUIRE(!a.rows.empty());
  CHECK(!a.rows.front().oom);
  for (std::size_t i = 1; i < a.rows.size(); ++i) {
    const auto& p = a.rows[i - 1];
    const auto& r = a.rows[i];
    CHECK((p.oom < r.oom || (p.oom == r.oom && p.step_time <= r.step_time)));
  }
  // The global batch is kept: 4 sequences over every data-parallel layout.
  for (const auto& r : a.rows) {
    const auto& m = r.workload["mesh"];
    CHECK(r.local_batch * m["fsdp"].get<int>() * m["dp"].get<int>() == 4);
  }
  Json best = doc;
  best["workload"] = a.rows.front().workload;
  best["variants"] = Json::array({a.rows.front().variant});
  const StepResult again = run_training_step(parse_scenario(best, ""));
  CHECK(again.runs[0].sim.makespan == a.rows.front().step_time);
}

TEST_CASE("advise needs a training step", "[step][advise]") {
  const Json doc = Json::parse(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 8192, "k": 4096, "n": 4096}})");
  CHECK_THROWS_AS(advise(doc, ""), InputError);
}

TEST_CASE("advise tries TP with and without sequence parallelism unless the scenario says which", "[step][advise]") {
  const auto rows_with = [](const std::string& extra) {
    const Json doc = Json::parse(R"({"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16", "variants": ["baseline"],
        "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 2, "mesh": {"fsdp": 2, "tp": 8})" +
                                 extra + "}}");
    return advise(doc, "").rows;
  };
  int on = 0, off = 0;
  for (const AdviceRow& r : rows_with("")) {
    const int tp = r.workload["mesh"]["tp"].get<int>();
    if (tp == 1) {
      CHECK_FALSE(r.workload.contains("sequence_parallel"));  // nothing to parallelize without TP
      continue;
    }
    const bool sp = r.workload.at("sequence_parallel").get<bool>();
    CHECK((r.mesh.find("(no SP)") != std::string::npos) == !sp);
    ++(sp ? on : off);
  }
  CHECK(on > 0);
  CHECK(off == on);  // every TP mesh both ways
  // Said in the scenario: kept.
  for (const AdviceRow& r : rows_with(R"(, "sequence_parallel": true)")) CHECK(r.mesh.find("(no SP)") == std::string::npos);
}

TEST_CASE("advise ranks the same on one thread as on several", "[step][advise]") {
  const Json doc = Json::parse(R"({"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16", "variants": ["baseline", "async_tp"],
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 2, "mesh": {"fsdp": 2, "tp": 8}}})");
  const Advice one = advise(doc, "", 1), four = advise(doc, "", 4);
  CHECK(one.candidates == four.candidates);
  CHECK(one.invalid == four.invalid);
  CHECK(advice_json(one, 100000) == advice_json(four, 100000));
}

TEST_CASE("advise tries torchtitan's per-op checkpointing where the scenario runs it", "[step][advise]") {
  const auto checkpoints = [](const std::string& ck) {
    const Json doc = Json::parse(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "variants": ["baseline"],
        "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 4096, "local_batch": 1, "mesh": {"fsdp": 8},
                     "sequence_parallel": true, "activation_checkpoint": ")" + ck + R"("}})");
    std::set<std::string> seen;
    for (const AdviceRow& r : advise(doc, "").rows) seen.insert(r.checkpoint);
    return seen;
  };
  CHECK(checkpoints("selective_op") == std::set<std::string>{"full", "none", "selective", "selective_op"});
  CHECK(checkpoints("full") == std::set<std::string>{"full", "none", "selective"});
}
