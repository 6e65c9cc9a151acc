#include "support/catch.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <unistd.h>

#include "support/simulate.hpp"
#include "tpsim/report/chrome_trace.hpp"
#include "tpsim/report/result_writers.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_scenario(parse_json_text(text, "scenario"), "");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kGood = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
    "workload": {"op": "allgather_matmul", "m": 16384, "k": 8192, "n": 3584}})";

}  // namespace

TEST_CASE("A valid scenario parses and defaults to every variant of its op", "[io][scenario]") {
  const Scenario s = parse_scenario(Json::parse(kGood), "");
  CHECK(s.gpus == 8);
  CHECK(s.workload.m == 16384);
  CHECK(s.variants == std::vector<std::string>{"baseline", "async_tp", "async_tp_single_stream", "async_tp_nccl", "ring",
                                               "ring_bidirectional", "fused"});
}

TEST_CASE("Bad scenarios are rejected with the JSON path and the problem", "[io][scenario]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpu": 8})"), Contains("$: unknown key \"gpu\" (did you mean \"gpus\"?)"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 16384, "kk": 1, "n": 1}})"),
             Contains("$.workload: unknown key \"kk\" (did you mean \"k\"?)"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": "big", "k": 1, "n": 1}})"),
             Contains("$.workload.m: must be a positive integer, got string"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 0, "k": 1, "n": 1}})"),
             Contains("$.workload.m: must be a positive integer, got 0"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 100, "k": 1, "n": 1}})"),
             Contains("$.workload.m: 100 rows do not divide evenly over 8 GPUs"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxn", "gpus": 8, "dtype": "bf16", "workload": {"op": "matmul", "m": 1, "k": 1, "n": 1}})"),
             Contains("$.hardware: unknown hardware \"h100_sxn\" (did you mean \"h100_sxm\"?)"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 8, "k": 1, "n": 1}, "variants": ["asynctp"]})"),
             Contains("$.variants[0]: variant \"asynctp\" is not available for allgather_matmul (did you mean \"async_tp\"?)"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf17", "workload": {"op": "matmul", "m": 1, "k": 1, "n": 1}})"),
             Contains("$.dtype: unknown dtype \"bf17\""));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 1099511627776, "k": 1, "n": 1}})"),
             Contains("$.workload.m: 1099511627776 is larger than the limit"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 8, "k": 1, "n": 1})"),
             Contains("scenario: malformed JSON"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 1, "dtype": "bf16", "workload": {"op": "alltoall_matmul", "m": 8, "k": 1, "n": 1}})"),
             Contains("$.gpus: alltoall_matmul needs at least 2 GPUs"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16"})"), Contains("$: missing required key \"workload\""));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "matmul", "m": 1, "k": 1, "n": 1}, "software": {"symm_mem_reduction": "torch_sum"}})"),
             Contains("$.software.symm_mem_reduction: unknown reduction \"torch_sum\" (aten_sum or triton)"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "matmul", "m": 1, "k": 1, "n": 1}, "software": {"symm_mem_reduce": "triton"}})"),
             Contains("$.software: unknown key \"symm_mem_reduce\" (did you mean \"symm_mem_reduction\"?)"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "matmul", "m": 1, "k": 1, "n": 1}, "software": {"op_issue": "graph"}})"),
             Contains("$.software.op_issue: unknown op issue \"graph\" (compiled, eager, cuda_graph or enqueued)"));
  // Found by fuzzing: a number too large for a double is bad input, not an internal error.
  CHECK_THAT(error_of(R"({"gpus": 66666666e66666666666666666666666666666666})"), Contains("scenario: malformed JSON: number overflow"));
}

TEST_CASE("Bad hardware files name the JSON path of the problem", "[io][hardware]") {
  using Catch::Matchers::Contains;
  Json hw = read_json_file(models_dir() + "/h100_sxm.json");
  Json broken = hw;
  broken["sm"]["count"]["unit"] = "GB/s";
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.sm.count.unit: unit \"GB/s\" is not a count unit"));
  broken = hw;
  broken["memory"]["hbm_bandwith"] = broken["memory"]["hbm_bandwidth"];
  broken["memory"].erase("hbm_bandwidth");
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.memory: unknown key \"hbm_bandwith\" (did you mean \"hbm_bandwidth\"?)"));
  broken = hw;
  broken["gemm"]["tiles"][0]["shape"] = "128by256";
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.gemm.tiles[0].shape: must look like"));
  broken = hw;
  broken["gemm"]["tiles"][0]["dtypes"] = Json::array({"bf61"});
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.gemm.tiles[0].dtypes[0]: unknown dtype \"bf61\""));
  broken = hw;
  for (auto& t : broken["gemm"]["tiles"]) t["dtypes"] = Json::array({"bf16", "fp16", "fp8"});
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.gemm.tiles: no tile serves fp32"));
  broken = hw;
  broken["reduction"].erase("triton");
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.reduction: missing required key \"triton\""));
  broken = hw;
  broken["launch"]["host_overhead"]["value"] = -1;
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.launch.host_overhead.value: must be positive"));
  broken = hw;
  broken["launch"].erase("repeat_latency");
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.launch: missing required key \"repeat_latency\""));
  broken = hw;
  broken["nccl"].erase("channel_reduce_bandwidth");
  CHECK_THROWS_WITH(parse_hardware(broken, "x"),
                    Contains("$.nccl: needs both \"channel_copy_bandwidth\" and \"channel_reduce_bandwidth\" or neither"));
  broken = hw;
  broken["nccl"]["nvls"]["min_ranks"]["value"] = 1;
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.nccl.nvls.min_ranks.value: NVLS needs at least 2 ranks"));
  broken = hw;
  broken["nccl"]["nvls"].erase("min_ranks");
  CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains("$.nccl.nvls: missing required key \"min_ranks\""));
  // NCCL's send/recv planning: channel counts NCCL rounds to powers of 2, the protocols it
  // runs, and the key these files had before nccl.p2p.
  const std::vector<std::pair<std::function<void(Json&)>, std::string>> p2p_errors = {
      {[](Json& n) { n["p2p"]["channels"]["value"] = 24; }, "$.nccl.p2p.channels.value: must be a power of 2"},
      {[](Json& n) { n["p2p"]["channels_per_peer"]["value"] = 64; }, "$.nccl.p2p.channels_per_peer: cannot exceed nccl.p2p.channels"},
      {[](Json& n) { n["protocols"].erase("LL"); }, "$.nccl.protocols: needs \"LL\" and \"Simple\""},
      {[](Json& n) { n["p2p_channels"] = n["p2p"]["channels"]; }, "$.nccl: unknown key \"p2p_channels\""},
      {[](Json& n) { n["protocols"]["LL"]["startup"]["value"] = -1; }, "$.nccl.protocols.LL.startup.value: must be positive"},
      {[](Json& n) { n["protocols"]["Simple"]["start_up"] = n["protocols"]["Simple"]["startup"]; },
       "$.nccl.protocols.Simple: unknown key \"start_up\""},
  };
  for (const auto& [mutate, message] : p2p_errors) {
    broken = hw;
    mutate(broken["nccl"]);
    CHECK_THROWS_WITH(parse_hardware(broken, "x"), Contains(message));
  }
}

TEST_CASE("The same scenario gives byte-identical JSON and trace", "[io][determinism]") {
  const auto a = simulate(kGood), b = simulate(kGood);
  CHECK(result_json(a).dump() == result_json(b).dump());
  CHECK(chrome_trace(a).dump() == chrome_trace(b).dump());
}

TEST_CASE("The trace has a process per GPU and variant, stream and copy-engine tracks, counters and flows", "[io][trace]") {
  const auto r = simulate(R"({"hardware": "h100_sxm", "gpus": 2, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 4096, "k": 4096, "n": 4096}, "variants": ["baseline", "async_tp"]})");
  const Json t = chrome_trace(r);
  int processes = 0, copies = 0, counters = 0, flows = 0, gemms_with_args = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "X" && e["cat"] == "copy" && e["tid"].get<int>() >= 100) ++copies;
    if (e["ph"] == "C") ++counters;
    if (e["ph"] == "s") ++flows;
    if (e["ph"] == "X" && e["cat"] == "gemm" && e["args"].contains("flops") && e["args"].contains("shape")) ++gemms_with_args;
  }
  CHECK(processes == 4);
  CHECK(copies == 2);
  CHECK(counters > 4);
  CHECK(flows > 0);
  CHECK(gemms_with_args == 2 + 4);
}

TEST_CASE("A TP group never outgrows the system a hardware model describes", "[io][scenario]") {
  const std::string ag = R"("dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 65536, "k": 1024, "n": 1024}})";
  // One-node topologies: more GPUs than the node holds is refused, naming the way out.
  CHECK_THAT(error_of(R"({"hardware": "h100_pcie", "gpus": 64, )" + ag),
             Catch::Matchers::Contains("$.gpus: h100_pcie is one node of 8 GPUs (topology \"pairs\"); 64 GPUs need a multi_node hardware model"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 16, )" + ag), Catch::Matchers::Contains("h100_sxm is one node of 8 GPUs"));
  CHECK(error_of(R"({"hardware": "h100_sxm", "gpus": 8, )" + ag) == "");
  // Across nodes the node count follows from gpus, and the scenario says what it assumed.
  const Scenario s = parse_scenario(Json::parse(R"({"hardware": "h100_sxm_2node", "gpus": 64, )" + ag), "");
  REQUIRE(s.notes.size() == 2);
  CHECK(s.notes[0] == "64 GPUs on h100_sxm_2node: 8 node(s) of up to 8 GPUs, one NIC per GPU between nodes");
  // Symmetric memory and the Mosaic kernel map peers' buffers over NVLink: one node only.
  CHECK(s.notes[1] == "left out async_tp, async_tp_single_stream, fused (peers' memory mapped over NVLink: one node only)");
  CHECK(s.variants == std::vector<std::string>{"baseline", "async_tp_nccl", "ring", "ring_bidirectional"});
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm_2node", "gpus": 16, "variants": ["baseline", "async_tp"], )" + ag),
             Catch::Matchers::Contains("$.variants[1]: async_tp maps its peers' memory over NVLink, so its group must sit in one node; "
                                       "these 16 GPUs span 2 nodes"));
  // Inside one node of the same model every variant stays.
  CHECK(parse_scenario(Json::parse(R"({"hardware": "h100_sxm_2node", "gpus": 8, )" + ag), "").variants.size() == 7);
}

TEST_CASE("A custom model's layer GEMMs are bounded like any GEMM", "[io][scenario]") {
  const std::string big = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "workload": {"op": "ffn",
      "model": {"hidden": 1048576, "ffn_hidden": 1048576, "heads": 8, "kv_heads": 8, "head_dim": 128},
      "tokens": 1048576, "seq_len": 8192}})";
  CHECK_THAT(error_of(big), Catch::Matchers::Contains("$.workload.model: a 1048576 x 1048576 operand"));
  CHECK_THAT(error_of(big), Catch::Matchers::Contains("larger than any GPU memory holds (limit 2^36 elements)"));
}

TEST_CASE("The trace streams to its file as the same bytes, can be cut down, and refuses to grow past its bound", "[io][trace]") {
  const auto r = simulate(R"({"hardware": "h100_sxm", "gpus": 4, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 4096, "k": 4096, "n": 4096}, "variants": ["baseline", "async_tp"]})");
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("tpsim_trace_test_{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "t.json").string();
  write_trace_file(file, r, {});
  std::ifstream in(file);
  const std::string streamed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(streamed == chrome_trace(r).dump() + "\n");  // streaming changes nothing

  // Ops alone, on two ranks: no counters or arrows, no other GPU's process.
  TraceOptions small;
  small.detail = TraceDetail::ops;
  small.ranks = parse_trace_ranks("0,2", 4);
  const Json t = chrome_trace(r, small);
  std::set<int> pids;
  for (const auto& e : t["traceEvents"]) {
    CHECK(e["ph"] != "C");
    CHECK(e["ph"] != "s");
    pids.insert(e["pid"].get<int>() % 1000 - 1);
  }
  CHECK(pids == std::set<int>{0, 2});
  CHECK(trace_event_estimate(r, small) < trace_event_estimate(r, {}));
  CHECK_THROWS_WITH(parse_trace_ranks("0,4", 4), "--trace-ranks: \"4\" is not a rank of this 4-GPU scenario (0 to 3)");

  // Past the bound: refused with the way out, and nothing written.
  const std::string big = (dir / "big.json").string();
  CHECK_THROWS_WITH(write_trace_file(big, r, {}, 10), Catch::Matchers::Contains("trace fewer ranks (--trace-ranks 0,1)"));
  CHECK_FALSE(std::filesystem::exists(big));
  std::filesystem::remove_all(dir);
}

TEST_CASE("A scenario timed as a burst runs a compute-bound GEMM at the clock ceiling, where the model gives one", "[io][scenario][power]") {
  using Catch::Matchers::Contains;
  const std::string gemm = R"("gpus": 1, "dtype": "bf16", "workload": {"op": "matmul", "m": 8192, "k": 8192, "n": 8192})";
  const double sustained = makespan_us(simulate(R"({"hardware": "h100_sxm", )" + gemm + "}"), "baseline");
  const Scenario burst = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "software": {"clock": "burst"}, )" + gemm + "}"), "");
  CHECK(burst.hardware.power.burst);
  CHECK(sustained / makespan_us(run_scenario(burst), "baseline") == Approx(burst.hardware.power.burst_speed).epsilon(0.03));
  CHECK(makespan_us(simulate(R"({"hardware": "h100_sxm", "software": {"clock": "sustained"}, )" + gemm + "}"), "baseline") == sustained);
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "software": {"clock": "boost"}, )" + gemm + "}"),
             Contains("$.software.clock: unknown clock \"boost\" (sustained or burst)"));
  CHECK_THAT(error_of(R"({"hardware": "b200", "software": {"clock": "burst"}, )" + gemm + "}"),
             Contains("$.software.clock: hardware b200 gives no power.burst_speed"));
  CHECK_THAT(error_of(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "software": {"clock": "burst"},
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"fsdp": 8}}})"),
             Contains("$.software.clock: a training step runs at the sustained clock"));
}
