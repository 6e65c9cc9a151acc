#include "support/catch.hpp"

#include <algorithm>
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/step/context_parallel.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

// 16 GPUs in two nodes of h100_sxm; `order` decides whether cp shares a node.
std::string cp_step(int tp, int cp, int fsdp, const std::string& method, const std::string& order = R"(["tp", "cp", "fsdp"])",
                    std::int64_t seq = 16384) {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": {}, "local_batch": 1,
                    "mesh": {{"tp": {}, "cp": {}, "fsdp": {}}}, "mesh_order": {}, "cp_method": "{}"}},
      "variants": ["baseline"]}})",
                     tp * cp * fsdp, seq, tp, cp, fsdp, order, method);
}

Scenario parse(const std::string& json) { return parse_scenario(Json::parse(json), ""); }

double bytes_of(const std::vector<StepCollective>& cs, const std::string& op_prefix) {
  for (const auto& c : cs)
    if (c.op.rfind(op_prefix, 0) == 0) return c.cost.wire_bytes;
  return -1;
}

}  // namespace

TEST_CASE("context parallelism divides a rank's attention FLOPs by cp: balanced causal chunks", "[step][cp]") {
  for (int cp : {2, 4, 8}) {
    const Scenario s = parse(cp_step(2, cp, 1, "ring", R"(["tp", "cp"])"));
    const TrainingStepSpec& t = s.workload.step;
    for (bool backward : {false, true}) {
      const AttentionProblem block = cp_block_problem(t, s.dtype, backward);
      const AttentionProblem whole{t.microbatch_tokens(), t.seq_len, block.heads, block.kv_heads, block.head_dim, true, backward, s.dtype};
      // cp steps per rank, cp ranks: the whole causal attention of the TP rank's heads, once.
      CHECK(cp * cp * attention_flops(block) == Approx(attention_flops(whole)));
    }
  }
}

TEST_CASE("ring and all-gather move the same K/V bytes per rank: cp - 1 blocks", "[step][cp]") {
  const int cp = 4;
  const Scenario ring = parse(cp_step(4, cp, 1, "ring", R"(["tp", "cp"])"));
  const Scenario gather = parse(cp_step(4, cp, 1, "allgather", R"(["tp", "cp"])"));
  const TrainingStepSpec& t = ring.workload.step;
  // K and V of the rank's tokens and its TP share of the KV heads (8 over tp 4: 2 heads).
  const double block = 2.0 * (16384 / cp) * 2 * 128 * 2;
  CHECK(cp_kv_block_bytes(t, 2) == Approx(block));
  const CpAttentionCost rf = simulate_cp_attention(t, ring.hardware, ring.dtype, false);
  const CpAttentionCost gf = simulate_cp_attention(gather.workload.step, gather.hardware, gather.dtype, false);
  CHECK(rf.transfers == cp - 1);
  CHECK(gf.transfers == 1);
  CHECK(rf.transfers * bytes_of(rf.collectives, "send_recv (K/V") == Approx((cp - 1) * block));
  CHECK(bytes_of(gf.collectives, "all_gather") == Approx((cp - 1) * block));
  // Backward rotates K/V the same way and passes the fp32 dK/dV accumulators once per step.
  const CpAttentionCost rb = simulate_cp_attention(t, ring.hardware, ring.dtype, true);
  CHECK(rb.transfers == (cp - 1) + cp);
  CHECK(bytes_of(rb.collectives, "send_recv (fp32 dK/dV") == Approx(2 * block));
}

TEST_CASE("torchtitan's model code hands the ring K and V repeated to every query head", "[step][cp]") {
  // repeat_kv runs before SDPA in torchtitan's model code (eager or compiled), so the ring
  // moves, and backward accumulates, heads / kv_heads times the GQA bytes: 32 / 8 for 8B.
  const int cp = 4, tp = 2;
  const auto with = [&](const std::string& extra) {
    std::string json = cp_step(tp, cp, 1, "allgather", R"(["tp", "cp"])");
    json.insert(json.find(R"("cp_method")"), extra);
    return parse(json);
  };
  const Scenario fused = with("");
  const double gqa = cp_kv_block_bytes(fused.workload.step, 2);
  CHECK(gqa == Approx(2.0 * (16384 / cp) * (8 / tp) * 128 * 2));
  for (const char* code : {R"("compile": true, )", R"("elementwise": "aten", )"}) {
    const Scenario titan = with(code);
    INFO(code);
    CHECK(cp_kv_block_bytes(titan.workload.step, 2) == Approx(gqa * 32 / 8));
    const CpAttentionCost f = simulate_cp_attention(fused.workload.step, fused.hardware, fused.dtype, true);
    const CpAttentionCost r = simulate_cp_attention(titan.workload.step, titan.hardware, titan.dtype, true);
    CHECK(bytes_of(r.collectives, "all_gather") == Approx(4 * bytes_of(f.collectives, "all_gather")));
    CHECK(bytes_of(r.collectives, "send_recv (fp32 dK/dV") == Approx(4 * bytes_of(f.collectives, "send_recv (fp32 dK/dV")));
    // The same attention kernels, more bytes beside them: the loop never gets faster.
    CHECK(r.compute_alone >= f.compute_alone);
    CHECK(r.loop >= f.loop);
  }
  // With as many K/V heads as query heads there is nothing to repeat.
  CHECK_FALSE(kv_repeated_for_sdpa(true, false, 32, 32));
  CHECK_FALSE(kv_repeated_for_sdpa(true, true, 1, 32));  // MLA's per-head keys and values
  CHECK_FALSE(kv_repeated_for_sdpa(false, false, 8, 32));
}

TEST_CASE("the block loop is never faster than its kernels and hides part of its transfers", "[step][cp]") {
  for (const char* method : {"ring", "allgather"})
    for (bool backward : {false, true}) {
      const Scenario s = parse(cp_step(8, 2, 1, method));  // cp across the two nodes: NIC transfers
      const CpAttentionCost c = simulate_cp_attention(s.workload.step, s.hardware, s.dtype, backward);
      double transfers = 0;
      for (const auto& x : c.collectives) transfers += static_cast<double>(x.cost.time);
      INFO(method << (backward ? " backward" : " forward"));
      CHECK(c.loop >= c.compute_alone);
      CHECK(static_cast<double>(c.loop) < static_cast<double>(c.compute_alone) + c.transfers * transfers);
      CHECK(c.first_block > 0);
      CHECK(c.extra() > 0);
    }
}

TEST_CASE("context parallelism inside a node beats the same mesh with cp across nodes", "[step][cp][mesh]") {
  for (const char* method : {"ring", "allgather"}) {
    const StepResult inside = run_training_step(parse(cp_step(4, 2, 2, method, R"(["tp", "cp", "fsdp"])")));
    const StepResult across = run_training_step(parse(cp_step(4, 2, 2, method, R"(["tp", "fsdp", "cp"])")));
    INFO(method);
    CHECK(inside.runs[0].exposed_comm.at("cp") < across.runs[0].exposed_comm.at("cp"));
    CHECK(inside.runs[0].costs.backward < across.runs[0].costs.backward);
    // Where the forward's K/V transfers hide behind attention either way, what is left is the
    // SMs their kernels hold: NCCL gives a peer in the node up to 32 channels and one across
    // nodes 2, so the forward inside may lose a sliver (under 0.1%), never more.
    CHECK(static_cast<double>(inside.runs[0].costs.forward) < 1.001 * static_cast<double>(across.runs[0].costs.forward));
  }
}

TEST_CASE("all-gather CP holds every rank's K/V block, a ring only two: the memory trap grows with cp", "[step][cp][memory]") {
  const auto buffers = [](const std::string& json) {
    const StepResult r = run_training_step(parse(json));
    for (const auto& [kind, b] : r.runs[0].memory[0].parts)
      if (kind == "context-parallel K/V buffers") return b;
    return -1.0;
  };
  const double g4 = buffers(cp_step(2, 4, 1, "allgather", R"(["tp", "cp"])")), r4 = buffers(cp_step(2, 4, 1, "ring", R"(["tp", "cp"])"));
  const double g8 = buffers(cp_step(2, 8, 1, "allgather", R"(["tp", "cp"])")), r8 = buffers(cp_step(2, 8, 1, "ring", R"(["tp", "cp"])"));
  CHECK(g4 > r4);
  CHECK(r8 == Approx(r4 / 2));  // a block is 1/cp of the sequence
  // All-gather: cp blocks of 1/cp each are the whole K/V (W), plus two fp32 blocks (4 W / cp):
  // W + W at cp 4, W + W/2 at cp 8.
  CHECK(g8 == Approx(g4 * 0.75));
  CHECK(g8 / r8 > g4 / r4);
}

TEST_CASE("FSDP shards parameters over fsdp x cp: CP ranks hold the same weights", "[step][cp][memory]") {
  const StepResult r = run_training_step(parse(cp_step(4, 2, 2, "ring")));
  const auto& t = r.scenario.workload.step;
  const double params = t.model.layers * t.model.layer_params() + 2 * t.model.embedding_params();
  double states = 0;
  for (const auto& [kind, b] : r.runs[0].memory[0].parts)
    if (kind == "parameters (fp32 shard)" || kind == "gradients (fp32 shard)" || kind == "optimizer state (AdamW moments)") states += b;
  CHECK(states == Approx(16 * params / (4 * 2 * 2)));
  bool fsdp_gather = false;
  for (const auto& c : r.runs[0].plan.collectives) fsdp_gather |= c.dim == "fsdp" && c.op == "all_gather";
  CHECK(fsdp_gather);
}

TEST_CASE("bad context-parallel input is one line naming the JSON path", "[step][cp][input]") {
  CHECK(test::scenario_error(cp_step(8, 2, 1, "ring", R"(["tp", "cp"])", 16382)).find("$.workload.seq_len") != std::string::npos);
  CHECK(test::scenario_error(cp_step(8, 2, 1, "ring", R"(["tp", "cp"])", 16382)).find("2 x cp = 4 equal chunks") != std::string::npos);
  CHECK(test::scenario_error(cp_step(8, 2, 1, "rnig")).find("$.workload.cp_method") != std::string::npos);
  CHECK(test::scenario_error(cp_step(8, 2, 1, "rnig")).find("did you mean \"ring\"") != std::string::npos);
  const std::string ep = R"({"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8, "ep": 2}},
      "variants": ["baseline"]})";
  CHECK(test::scenario_error(ep).find("$.workload.mesh.ep") != std::string::npos);
  // cp inside tp spreads each TP group over both nodes: simulated across the NICs, said in a note.
  const Scenario spread = parse_scenario(Json::parse(cp_step(8, 2, 1, "ring", R"(["cp", "tp"])")), "");
  CHECK(std::find_if(spread.notes.begin(), spread.notes.end(), [](const std::string& n) {
          return n.find("each TP group spans 2 nodes (4 GPUs in each)") != std::string::npos;
        }) != spread.notes.end());
  CHECK(test::scenario_error(cp_step(4, 2, 2, "ring", R"(["cp", "tp", "fsdp"])")).empty());  // 4 x 2 still fits a node
}
