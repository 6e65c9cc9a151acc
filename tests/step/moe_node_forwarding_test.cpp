// DeepSeek-V3's all-to-alls: DeepEP's node forwarding, node-limited routing, fp8 dispatch.
#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/all_to_all.hpp"
#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

constexpr double kNvlink = 450.0, kNic = 50.0;  // bytes per ps: H100's NVLink port against a 400 Gb/s NIC
constexpr double kSent = 1.0e6;

GroupLayout layout(int ranks, int per_node) {
  GroupLayout g;
  g.ranks = ranks, g.per_node = per_node, g.nodes = (ranks + per_node - 1) / per_node;
  return g;
}

AllToAllTraffic even(int n, bool back, bool forwarding, double fraction) {
  AllToAllTraffic t{kSent, std::vector<double>(static_cast<std::size_t>(n), 1.0 / n), back};
  t.node_forwarding = forwarding, t.network_fraction = fraction;
  return t;
}

// 64 experts, top 8, on ep members of h100_sxm nodes (8 GPUs each), ep innermost.
std::string deepseek_like(int ep, const std::string& extra) {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "seq_len": 4096, "local_batch": 1, "linear_dtype": "fp8",
                    "model": {{"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 4,
                               "vocab": 32000, "experts": 64, "top_k": 8, "expert_ffn_hidden": 1024}},
                    "mesh": {{"ep": {}}}, "mesh_order": ["ep", "tp"]{}}},
      "variants": ["baseline"]}})",
                     ep, ep, extra.empty() ? "" : ", " + extra);
}

MoeLayerCost moe_layer(int ep, const std::string& extra) {
  const Scenario s = parse_scenario(Json::parse(deepseek_like(ep, extra)), "");
  return simulate_moe_layer(s.workload.step, s.hardware, s.dtype, false);
}

}  // namespace

TEST_CASE("node-limited routing: a token reaches at most its node limit, at most top_k nodes, and the limit only ever cuts", "[step][ep]") {
  // One node, or one expert per token: one node.
  CHECK(distinct_nodes_per_token(256, 8, 1, 0) == 1);
  CHECK(distinct_nodes_per_token(256, 1, 8, 0) == Approx(1));
  // Top 8 of 256 experts on 8 nodes, uniform: 8 x (1 - C(224, 8) / C(256, 8)) = 5.29 nodes.
  CHECK(distinct_nodes_per_token(256, 8, 8, 0) == Approx(5.29).epsilon(0.01));
  // DeepSeek-V3's limit of 4 nodes: top 8 of their 128 experts reach 3.62 of them.
  CHECK(distinct_nodes_per_token(256, 8, 8, 4) == Approx(3.62).epsilon(0.01));
  double last = 0;
  for (int limit = 1; limit <= 8; ++limit) {
    const double d = distinct_nodes_per_token(256, 8, 8, limit);
    INFO("limit " << limit);
    CHECK(d <= limit + 1e-12);
    CHECK(d >= last);  // a looser limit never reaches fewer nodes
    last = d;
  }
  CHECK(distinct_nodes_per_token(256, 8, 8, 1) == Approx(1));
  CHECK(distinct_nodes_per_token(256, 8, 8, 8) == Approx(distinct_nodes_per_token(256, 8, 8, 0)));
  // With one expert per node every slot is on its own node: top_k nodes.
  CHECK(distinct_nodes_per_token(16, 4, 16, 0) == Approx(4));
}

TEST_CASE("node forwarding: the network carries each token once per node, and NVLink the rest", "[step][all_to_all][ep]") {
  for (const bool back : {false, true}) {
    INFO((back ? "combine" : "dispatch"));
    const double nccl = all_to_all_transfer_ps(layout(32, 8), even(32, back, false, 1), kNvlink, kNic, 1);
    // NCCL: 3/4 of every member's bytes leave its node, one NIC each.
    CHECK(nccl == Approx(kSent * 24 / 32 / kNic));
    // Forwarding without dedup moves the same network bytes and adds NVLink hops: never faster.
    CHECK(all_to_all_transfer_ps(layout(32, 8), even(32, back, true, 1), kNvlink, kNic, 1) >= nccl * (1 - 1e-9));
    // The network bytes scale with the fraction while the NICs pace the exchange.
    for (const double f : {0.5, 0.25}) {
      INFO("fraction " << f);
      CHECK(all_to_all_transfer_ps(layout(32, 8), even(32, back, true, f), kNvlink, kNic, 1) == Approx(f * nccl).epsilon(1e-6));
    }
    // Inside one node nothing crosses the network: forwarding changes nothing.
    CHECK(all_to_all_transfer_ps(layout(8, 8), even(8, back, true, 0.25), kNvlink, kNic, 1) ==
          Approx(all_to_all_transfer_ps(layout(8, 8), even(8, back, false, 1), kNvlink, kNic, 1)));
  }
  // With NVLink no faster than the NIC, the forwarded slots pace it instead: the network
  // pieces alone would take f x the NCCL time, the NVLink hops take longer.
  const double slow_nvlink = all_to_all_transfer_ps(layout(32, 8), even(32, false, true, 0.25), kNic, kNic, 1);
  CHECK(slow_nvlink > 0.25 * kSent * 24 / 32 / kNic * 1.5);
}

TEST_CASE("fp8 dispatch halves the dispatch-shaped all-to-alls and moves the experts' input casts before them", "[step][ep][fp8]") {
  const MoeLayerCost bf16 = moe_layer(16, R"("moe_all_to_all": "deepep")");
  const MoeLayerCost fp8 = moe_layer(16, R"("moe_all_to_all": "deepep", "moe_dispatch_dtype": "fp8")");
  // One fp32 scale per 128 channels rides along: (1 + 4/128) / 2 of the bf16 bytes.
  CHECK(fp8.dispatch_bytes == Approx(bf16.dispatch_bytes * (1 + 4.0 / 128) / 2));
  CHECK(fp8.dispatch < bf16.dispatch);
  CHECK(fp8.combine == bf16.combine);  // the combines stay in bf16
  // The step's collectives list says so: the dispatch's bytes in fp8, the combine's in bf16.
  for (const StepCollective& c : fp8.collectives) {
    INFO(c.op);
    if (c.op.find("dispatch") != std::string::npos) CHECK(c.bytes == Approx(fp8.dispatch_bytes));
    if (c.op.find("combine") != std::string::npos) CHECK(c.bytes == Approx(bf16.dispatch_bytes));
  }
  CHECK(fp8.forward < bf16.forward);
  CHECK(fp8.backward < bf16.backward);
  // The expert GEMMs no longer cast what arrives in fp8: the up-projection's input forward,
  // the down-projection's output gradient backward; everything else still casts.
  ExpertGroup g{512, 4, 2048, 1024, 2, Dtype::bf16, Dtype::fp8, true};
  const auto names = [&](bool backward) {
    std::vector<std::string> out;
    for (const auto& op : expert_group_ops(g, backward, "")) out.push_back(op.first);
    return out;
  };
  const auto has = [](const std::vector<std::string>& v, const std::string& n) { return std::find(v.begin(), v.end(), n) != v.end(); };
  CHECK(has(names(false), "experts.up.cast_input"));
  CHECK(has(names(true), "experts.down.backward.cast_grad_output"));
  g.fp8_dispatch = true;
  CHECK_FALSE(has(names(false), "experts.up.cast_input"));
  CHECK(has(names(false), "experts.down.cast_input"));
  CHECK_FALSE(has(names(true), "experts.down.backward.cast_grad_output"));
  CHECK(has(names(true), "experts.up.backward.cast_grad_output"));
}

TEST_CASE("DeepEP's forwarding and node-limited routing shorten a MoE layer across nodes, and change nothing inside one", "[step][ep]") {
  const MoeLayerCost nccl = moe_layer(32, "");
  const MoeLayerCost deepep = moe_layer(32, R"("moe_all_to_all": "deepep")");
  const MoeLayerCost limited = moe_layer(32, R"("moe_all_to_all": "deepep", "moe_node_limit": 2)");
  // DeepEP's kernels hold its 20 SMs, NCCL's its p2p channels.
  for (const StepCollective& c : deepep.collectives)
    if (c.dim == "ep") CHECK((c.cost.algorithm == "deepep" && c.cost.channels == kDeepEpSms));
  for (const StepCollective& c : nccl.collectives)
    if (c.dim == "ep") CHECK(c.cost.algorithm == "p2p");
  CHECK(deepep.dispatch < nccl.dispatch);
  CHECK(deepep.combine < nccl.combine);
  CHECK(limited.dispatch < deepep.dispatch);
  CHECK(limited.forward < deepep.forward);
  CHECK(limited.backward < deepep.backward);
  // Inside one node the all-to-all is NVLink either way.
  CHECK(moe_layer(8, R"("moe_all_to_all": "deepep")").dispatch == moe_layer(8, "").dispatch);
}

TEST_CASE("bad MoE all-to-all settings are one line naming the JSON path", "[step][ep][input]") {
  const auto error = [](const std::string& extra) { return test::scenario_error(deepseek_like(16, extra)); };
  CHECK(error(R"("moe_all_to_all": "deepep", "moe_node_limit": 2, "moe_dispatch_dtype": "fp8")").empty());
  CHECK(error(R"("moe_node_limit": 2)").find("$.workload.moe_node_limit: applies to \"moe_all_to_all\": \"deepep\"") != std::string::npos);
  CHECK(error(R"("moe_all_to_all": "deepep", "moe_node_limit": 0)").find("$.workload.moe_node_limit") != std::string::npos);
  CHECK(error(R"("moe_all_to_all": "nvshmem")").find("$.workload.moe_all_to_all") != std::string::npos);
  CHECK(error(R"("moe_dispatch_dtype": "fp4")").find("$.workload.moe_dispatch_dtype") != std::string::npos);
  // 64 experts on 2 nodes: one node holds 32, enough for top 8; the limit passes.
  CHECK(error(R"("moe_all_to_all": "deepep", "moe_node_limit": 1)").empty());
  const std::string bf16_linears = fmt::format(R"({{"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16",
      "workload": {{"op": "training_step", "seq_len": 4096, "local_batch": 1,
                    "model": {{"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 4,
                               "vocab": 32000, "experts": 64, "top_k": 8, "expert_ffn_hidden": 1024}},
                    "mesh": {{"ep": 16}}, "moe_dispatch_dtype": "fp8"}}}})");
  CHECK(test::scenario_error(bf16_linears).find("$.workload.moe_dispatch_dtype: \"fp8\" sends the inputs of fp8 expert GEMMs") !=
        std::string::npos);
  const std::string dense = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8},
                   "moe_all_to_all": "deepep"}})";
  CHECK(test::scenario_error(dense).find("$.workload.moe_all_to_all: llama3_8b has no experts") != std::string::npos);
}

TEST_CASE("a node limit too tight for top_k is refused with its path", "[step][ep][input]") {
  // 8 experts (one per rank) over 8 nodes of one member each (ep outermost after tp 8), top 4: one node holds 1.
  const std::string s = R"({"hardware": "h100_sxm", "gpus": 64, "dtype": "bf16",
      "workload": {"op": "training_step", "seq_len": 4096, "local_batch": 1,
                   "model": {"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 4,
                             "vocab": 32000, "experts": 8, "top_k": 4, "expert_ffn_hidden": 1024},
                   "mesh": {"tp": 8, "ep": 8}, "mesh_order": ["tp", "ep"], "moe_all_to_all": "deepep", "moe_node_limit": 2}})";
  CHECK(test::scenario_error(s).find("$.workload.moe_node_limit: 2 node(s) of the ep group hold 2 experts, fewer than top_k 4") !=
        std::string::npos);
}
