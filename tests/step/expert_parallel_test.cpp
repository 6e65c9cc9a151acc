#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"
#include "tpsim/io/model_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

// A small MoE model (8 experts of 4096, top 2) on two nodes of h100_sxm.
std::string moe_step(int tp, int ep, int fsdp, const std::string& order, const std::string& extra = "", int top_k = 2,
                     const std::string& model_extra = "") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "seq_len": 4096, "local_batch": 1,
                    "model": {{"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128, "layers": 4,
                               "vocab": 32000, "experts": 8, "top_k": {}, "expert_ffn_hidden": 4096{}}},
                    "mesh": {{"tp": {}, "ep": {}, "fsdp": {}}}, "mesh_order": {}{}}},
      "variants": ["baseline"]}})",
                     tp * ep * fsdp, top_k, model_extra, tp, ep, fsdp, order, extra.empty() ? "" : ", " + extra);
}

Scenario parse(const std::string& json) { return parse_scenario(Json::parse(json), ""); }

const ModelShape& preset(const std::string& name) {
  for (const auto& m : known_models())
    if (m.name == name) return m;
  throw std::logic_error("no preset " + name);
}

}  // namespace

TEST_CASE("Mixtral 8x7B has its published 47B weights, 13B of them active per token", "[step][ep][model]") {
  const ModelShape& m = preset("mixtral_8x7b");
  double total = 2 * m.embedding_params(), active = 2 * m.embedding_params();
  for (std::int64_t l = 0; l < m.layers; ++l) total += m.layer_params(l), active += m.active_layer_params(l);
  CHECK(total == Approx(46.7e9).epsilon(0.02));
  CHECK(active == Approx(12.9e9).epsilon(0.03));
  // Llama 4 Maverick: MoE every other layer, 400B weights; DeepSeek-V3 keeps 3 dense layers.
  CHECK(preset("llama4_maverick").moe_layers() == 24);
  CHECK(preset("deepseek_v3_like").moe_layers() == 58);
  CHECK_FALSE(preset("deepseek_v3_like").moe_layer(2));
  CHECK(preset("deepseek_v3_like").moe_layer(3));
}

TEST_CASE("all-to-all token slots are conserved: what the ep ranks send their experts receive", "[step][ep]") {
  for (const double skew : {0.0, 0.5, 3.0}) {
    const TrainingStepSpec t = parse(moe_step(2, 4, 1, R"(["tp", "ep"])", fmt::format(R"("expert_load_skew": {})", skew))).workload.step;
    const ExpertLoad l = expert_load(t);
    const double total = l.sent_slots * 4;
    CHECK(l.sent_slots == Approx(4096.0 * 2));  // the TP group's tokens, top 2
    double experts = 0, shares = 0, ranks = 0;
    for (double x : l.expert_slots) experts += x;
    for (double x : l.rank_share) shares += x;
    for (int r = 0; r < 4; ++r) ranks += l.rank_slots(r);
    CHECK(experts == Approx(total));
    CHECK(shares == Approx(1.0));
    CHECK(ranks == Approx(total));
    CHECK(l.expert_slots[0] == Approx((1 + skew) * total / 8));  // the hot expert
    CHECK(l.busiest_rank == 0);
    CHECK(l.rank_slots(l.busiest_rank) >= total / 4 - 1e-6);  // the busiest rank has at least its even share
  }
}

TEST_CASE("more routing skew never speeds up a MoE layer", "[step][ep]") {
  Tick last_f = 0, last_b = 0;
  for (const char* skew : {"0", "0.25", "1", "2", "3"}) {
    const Scenario s = parse(moe_step(2, 4, 1, R"(["tp", "ep"])", fmt::format(R"("expert_load_skew": {})", skew)));
    const MoeLayerCost c = simulate_moe_layer(s.workload.step, s.hardware, s.dtype, true);
    INFO("skew " << skew);
    CHECK(c.forward >= last_f);
    CHECK(c.backward >= last_b);
    last_f = c.forward, last_b = c.backward;
  }
  const Scenario even = parse(moe_step(2, 4, 1, R"(["tp", "ep"])"));
  const Scenario hot = parse(moe_step(2, 4, 1, R"(["tp", "ep"])", R"("expert_load_skew": 3)"));
  CHECK(simulate_moe_layer(hot.workload.step, hot.hardware, hot.dtype, true).forward >
        simulate_moe_layer(even.workload.step, even.hardware, even.dtype, true).forward);
}

TEST_CASE("expert parallelism inside a node beats the same mesh with ep across nodes", "[step][ep][mesh]") {
  const Scenario inside = parse(moe_step(2, 4, 2, R"(["tp", "ep", "fsdp"])"));
  const Scenario across = parse(moe_step(2, 4, 2, R"(["tp", "fsdp", "ep"])"));
  const MoeLayerCost in = simulate_moe_layer(inside.workload.step, inside.hardware, inside.dtype, true);
  const MoeLayerCost out = simulate_moe_layer(across.workload.step, across.hardware, across.dtype, true);
  CHECK(in.forward_all_to_all < out.forward_all_to_all);
  CHECK(in.forward < out.forward);
  const StepResult a = run_training_step(inside), b = run_training_step(across);
  CHECK(a.runs[0].exposed_comm.at("ep") < b.runs[0].exposed_comm.at("ep"));
  CHECK(a.runs[0].sim.makespan < b.runs[0].sim.makespan);
}

TEST_CASE("a rank's expert work grows with top_k and its all-to-all bytes with it", "[step][ep]") {
  const Scenario one = parse(moe_step(2, 4, 1, R"(["tp", "ep"])", "", 1));
  const Scenario two = parse(moe_step(2, 4, 1, R"(["tp", "ep"])", "", 2));
  const MoeLayerCost a = simulate_moe_layer(one.workload.step, one.hardware, one.dtype, true);
  const MoeLayerCost b = simulate_moe_layer(two.workload.step, two.hardware, two.dtype, true);
  CHECK(b.dispatch_bytes == Approx(2 * a.dispatch_bytes));
  CHECK(b.forward > a.forward);
  CHECK(b.backward > b.forward);  // twice the GEMM work backward
}

TEST_CASE("expert parallelism splits the routed experts' weights over ep", "[step][ep][memory]") {
  const StepResult r2 = run_training_step(parse(moe_step(2, 2, 1, R"(["tp", "ep"])")));
  const StepResult r4 = run_training_step(parse(moe_step(2, 4, 1, R"(["tp", "ep"])")));
  const ModelShape& m = r2.scenario.workload.step.model;
  const double routed = static_cast<double>(m.moe_layers()) * m.routed_expert_params();
  // This rank's weights before FSDP: everything else / tp, the routed experts / (tp x ep).
  CHECK(r2.runs[0].plan.stages[0].local - r4.runs[0].plan.stages[0].local == Approx(routed / 2 * (1.0 / 2 - 1.0 / 4)));
  // Tokens per GPU stay: ep ranks are data-parallel outside the MoE layers.
  CHECK(r4.scenario.workload.step.global_tokens() == 2 * r2.scenario.workload.step.global_tokens());
}

TEST_CASE("bad expert-parallel input is one line naming the JSON path", "[step][ep][input]") {
  CHECK(test::scenario_error(moe_step(2, 3, 1, R"(["tp", "ep"])")).find("$.workload.mesh.ep: 8 experts do not divide over ep 3") != std::string::npos);
  const std::string dense = R"({"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8, "ep": 2}},
      "variants": ["baseline"]})";
  CHECK(test::scenario_error(dense).find("$.workload.mesh.ep: ep 2 needs a mixture-of-experts model") != std::string::npos);
  CHECK(test::scenario_error(moe_step(2, 2, 1, R"(["tp", "ep"])", "", 9)).find("$.workload.model.top_k") != std::string::npos);
  CHECK(test::scenario_error(moe_step(8, 2, 1, R"(["tp", "ep"])", "", 2, R"(, "shared_experts": 0, "moe_every": 1)")).empty());
  CHECK(test::scenario_error(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16", "workload": {{"op": "training_step",
      "seq_len": 4096, "local_batch": 1, "model": {{"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 8, "head_dim": 128,
      "layers": 4, "vocab": 32000, "experts": 8, "top_k": 2, "expert_ffn_hidden": 1004}}, "mesh": {{"tp": 8, "ep": 2}}}}}})"))
            .find("$.workload.model.expert_ffn_hidden") != std::string::npos);
  CHECK(test::scenario_error(moe_step(2, 2, 1, R"(["tp", "ep"])", R"("expert_load_skew": -1)")).find("$.workload.expert_load_skew") !=
        std::string::npos);
  CHECK(test::scenario_error(moe_step(2, 2, 1, R"(["tp", "ep"])", R"("expert_load_skew": 3.5)")).find("at most 3") != std::string::npos);
  CHECK(test::scenario_error(moe_step(2, 2, 1, R"(["tp", "ep"])", "", 2, R"(, "moe_evry": 2)")).find("did you mean \"moe_every\"") !=
        std::string::npos);
  const std::string layer = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "transformer_layer", "model": "mixtral_8x7b", "tokens": 8192, "seq_len": 8192}})";
  CHECK(test::scenario_error(layer).find("mixture-of-experts") != std::string::npos);
}

TEST_CASE("chunked dispatch runs experts under the next chunk's all-to-all: less exposed, never below the kernels", "[step][ep]") {
  // ep across the two nodes: the all-to-alls go through the NICs and dominate.
  const std::string order = R"(["tp", "fsdp", "ep"])";
  const Scenario one = parse(moe_step(2, 4, 2, order));
  const Scenario four = parse(moe_step(2, 4, 2, order, R"("moe_dispatch_chunks": 4)"));
  const MoeLayerCost a = simulate_moe_layer(one.workload.step, one.hardware, one.dtype, true);
  const MoeLayerCost b = simulate_moe_layer(four.workload.step, four.hardware, four.dtype, true);
  CHECK(b.forward_all_to_all < a.forward_all_to_all);
  CHECK(b.backward_all_to_all < a.backward_all_to_all);
  CHECK(b.forward < a.forward);
  CHECK(b.backward < a.backward);
  // What is left exposed is at least the first chunk's dispatch and the last chunk's combine.
  CHECK(b.collectives[0].op == "all_to_all (dispatch, one chunk)");
  CHECK(b.collectives[1].op == "all_to_all (combine, one chunk)");
  CHECK(b.forward_all_to_all >= b.collectives[0].cost.time + b.collectives[1].cost.time);
  int dispatches = 0;
  for (const auto& p : b.forward_phases) dispatches += p.name.rfind("ep.all_to_all.dispatch.chunk", 0) == 0;
  CHECK(dispatches == 4);
  CHECK(test::scenario_error(moe_step(2, 4, 2, order, R"("moe_dispatch_chunks": 65)")).find("$.workload.moe_dispatch_chunks") !=
        std::string::npos);
  const std::string dense = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8},
                   "moe_dispatch_chunks": 2}})";
  CHECK(test::scenario_error(dense).find("$.workload.moe_dispatch_chunks: llama3_8b has no experts") != std::string::npos);
}

TEST_CASE("an expert_load histogram: even is uniform routing, one hot expert is the skew, and the hot rank paces the layer",
          "[step][ep]") {
  const std::string order = R"(["tp", "fsdp", "ep"])";  // ep across the two nodes
  const auto layer = [&](const std::string& extra) {
    const Scenario s = parse(moe_step(2, 4, 2, order, extra));
    return simulate_moe_layer(s.workload.step, s.hardware, s.dtype, true);
  };
  const MoeLayerCost none = layer(""), even = layer(R"("expert_load": [1, 1, 1, 1, 1, 1, 1, 1])");
  CHECK(even.forward == none.forward);
  CHECK(even.backward == none.backward);
  // Expert 0 at 3x the mean (21/56 = 3/8) is skew 2; the other seven share the rest evenly.
  const MoeLayerCost skew = layer(R"("expert_load_skew": 2)"), hist = layer(R"("expert_load": [21, 5, 5, 5, 5, 5, 5, 5])");
  CHECK(hist.forward == skew.forward);
  CHECK(hist.dispatch == skew.dispatch);
  CHECK(skew.forward > none.forward);
  // The hot rank's NIC takes the whole dispatch's extra bytes; its combine leaves through its
  // node's NICs together, so the dispatch is the slower of the two.
  CHECK(skew.dispatch > none.dispatch);
  CHECK(skew.combine < skew.dispatch);
  // Where the hot experts sit matters only through their rank: two hot experts on one rank
  // cost more than one on each of two ranks.
  const MoeLayerCost same_rank = layer(R"("expert_load": [3, 3, 1, 1, 1, 1, 1, 1])");
  const MoeLayerCost two_ranks = layer(R"("expert_load": [3, 1, 3, 1, 1, 1, 1, 1])");
  CHECK(same_rank.forward > two_ranks.forward);
  CHECK(same_rank.dispatch > two_ranks.dispatch);
}

TEST_CASE("bad expert_load histograms are one line naming the JSON path", "[step][ep][input]") {
  const auto error = [](const std::string& extra) { return test::scenario_error(moe_step(2, 4, 1, R"(["tp", "ep"])", extra)); };
  CHECK(error(R"("expert_load": [1, 1, 1])").find("$.workload.expert_load: must be an array of 8 numbers (one per expert), got 3") !=
        std::string::npos);
  CHECK(error(R"("expert_load": [1, 1, 1, 1, 1, 1, 1, -1])").find("$.workload.expert_load[7]: must be a number >= 0") != std::string::npos);
  CHECK(error(R"("expert_load": [0, 0, 0, 0, 0, 0, 0, 0])").find("$.workload.expert_load: needs a positive, finite total") !=
        std::string::npos);
  // top 2: no expert can take more than half of the slots (every token once).
  CHECK(error(R"("expert_load": [8, 1, 1, 1, 1, 1, 1, 1])").find("$.workload.expert_load[0]: gives this expert") != std::string::npos);
  CHECK(error(R"("expert_load": [1, 1, 1, 1, 1, 1, 1, 1], "expert_load_skew": 1)").find("not both") != std::string::npos);
  CHECK(error(R"("expert_load": "even")").find("$.workload.expert_load: must be an array of 8 numbers") != std::string::npos);
  const std::string dense = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8},
                   "expert_load": [1, 2]}})";
  CHECK(test::scenario_error(dense).find("$.workload.expert_load: llama3_8b has no experts") != std::string::npos);
}

namespace {

struct CastBytes {
  double read = 0, written = 0;
  int casts = 0, relayouts = 0, gemms = 0;
};

CastBytes cast_bytes(const ExpertGroup& g, bool backward) {
  CastBytes c;
  for (const auto& [name, op] : expert_group_ops(g, backward, "")) {
    if (std::holds_alternative<GemmOp>(op)) {
      ++c.gemms;
      CHECK(std::get<GemmOp>(op).problem.dtype == g.linear);
      continue;
    }
    const bool cast = name.find("cast") != std::string::npos, relayout = name.find("column_major") != std::string::npos;
    if (!cast && !relayout) continue;  // the activation
    const auto& e = std::get<ElementwiseOp>(op);
    c.read += e.bytes_read, c.written += e.bytes_written;
    ++(cast ? c.casts : c.relayouts);
  }
  return c;
}

}  // namespace

TEST_CASE("fp8 experts cast every grouped GEMM operand as torchao's rowwise recipe does, and bf16 experts cast nothing", "[step][ep][fp8]") {
  const ExpertGroup bf16{512, 4, 2048, 1024, 2, Dtype::bf16, Dtype::bf16, true};
  CHECK(cast_bytes(bf16, false).casts == 0);
  CHECK(cast_bytes(bf16, true).casts + cast_bytes(bf16, true).relayouts == 0);

  ExpertGroup fp8 = bf16;
  fp8.linear = Dtype::fp8;
  const double rows = 512.0 * 4, w_up = 4.0 * 2048 * 2 * 1024, w_down = 4.0 * 1024 * 2048;
  const double x_up = rows * 2048, x_down = rows * 1024, g_up = rows * 2 * 1024, g_down = rows * 2048;
  // Forward: the input and the weight of each of the two GEMMs, one byte per element out.
  const CastBytes fwd = cast_bytes(fp8, false);
  CHECK(fwd.gemms == 2);
  CHECK(fwd.casts == 4);
  CHECK(fwd.written == Approx(x_up + w_up + x_down + w_down));
  CHECK(fwd.read == Approx(2 * (x_up + w_up + x_down + w_down)));  // compiled: one bf16 read each
  // Eager reads each tensor twice (amax, then the scaled cast); the writes do not change.
  ExpertGroup eager = fp8;
  eager.compile = false;
  CHECK(cast_bytes(eager, false).read == Approx(2 * fwd.read));
  CHECK(cast_bytes(eager, false).written == Approx(fwd.written));
  // Backward, per GEMM: the output gradient twice (rowwise; per column after a column-major
  // copy), the weight transposed, the saved input per column after its copy.
  const CastBytes bwd = cast_bytes(fp8, true);
  CHECK(bwd.gemms == 4);
  CHECK(bwd.casts == 8);
  CHECK(bwd.relayouts == 4);
  CHECK(bwd.written == Approx((2 * g_up + w_up + x_up) + (2 * g_down + w_down + x_down) + 2 * (g_up + x_up + g_down + x_down)));
}

TEST_CASE("fp8 experts: faster GEMMs, and casts that cost twice the reads when eager", "[step][ep][fp8]") {
  const auto layer = [](const std::string& linear, bool compile) {
    const Scenario s = parse(moe_step(1, 8, 1, R"(["ep", "fsdp", "tp"])",
                                      fmt::format(R"("compile": {}, "linear_dtype": "{}")", compile ? "true" : "false", linear)));
    return simulate_moe_layer(s.workload.step, s.hardware, s.dtype, false);
  };
  const MoeLayerCost bf16 = layer("bf16", true), fp8 = layer("fp8", true), fp8_eager = layer("fp8", false);
  CHECK(fp8.forward < bf16.forward);  // (backward, with eight casts and four copies around its four GEMMs, is not on a layer this small)
  // Only the casts depend on compilation here: bf16 experts are unchanged, fp8 ones slower eager.
  CHECK(layer("bf16", false).forward == bf16.forward);
  CHECK(fp8_eager.forward > fp8.forward);
  CHECK(fp8_eager.backward > fp8.backward);
}

TEST_CASE("torchtitan's grouped experts multiply by w1 and w3 apart and sum their input gradients: the same FLOPs", "[step][ep]") {
  ExpertGroup fused{1024, 8, 2048, 1408, 2, Dtype::bf16, Dtype::bf16};
  ExpertGroup apart = fused;
  apart.grouped = true;
  const auto flops = [](const ExpertGroup& g, bool backward) {
    double f = 0;
    int gemms = 0;
    for (const auto& [name, op] : expert_group_ops(g, backward, ""))
      if (const auto* gemm = std::get_if<GemmOp>(&op)) {
        f += gemm->problem.flops(), ++gemms;
        CHECK(gemm->problem.grouped == g.grouped);
      }
    return std::pair{f, gemms};
  };
  for (bool backward : {false, true}) {
    const auto [f_fused, n_fused] = flops(fused, backward);
    const auto [f_apart, n_apart] = flops(apart, backward);
    CHECK(f_apart == Approx(f_fused));
    CHECK(n_apart == n_fused + (backward ? 2 : 1));
  }
  // Backward adds the two input gradients of x: one pass reading two, writing one.
  double sum_read = 0;
  for (const auto& [name, op] : expert_group_ops(apart, true, ""))
    if (name == "experts.up.input_grad_sum") sum_read = std::get<ElementwiseOp>(op).bytes_read;
  CHECK(sum_read == Approx(2.0 * 1024 * 8 * 2048 * 2));
  for (const auto& [name, op] : expert_group_ops(fused, true, "")) CHECK(name != "experts.up.input_grad_sum");
  // The key needs experts.
  const std::string dense = R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"tp": 8},
                   "expert_gemm": "grouped_mm"}})";
  CHECK(test::scenario_error(dense).find("$.workload.expert_gemm: llama3_8b has no experts") != std::string::npos);
}

TEST_CASE("unequal experts run as one grouped GEMM, as torchtitan's offsets give them: the FLOPs of their rows", "[step][ep]") {
  const auto ops_of = [&](const std::string& extra, bool backward) {
    const Scenario s = parse(moe_step(2, 4, 2, R"(["tp", "ep", "fsdp"])", R"("expert_gemm": "grouped_mm", )" + extra));
    return busiest_rank_expert_ops(s.workload.step, s.dtype, backward, 1);
  };
  for (bool backward : {false, true}) {
    // Experts 0 and 1 on the busiest rank, at 3 and 1 parts: one kernel per projection, ragged.
    const auto skewed = ops_of(R"("expert_load": [3, 1, 1, 1, 1, 1, 1, 1])", backward);
    int gemms = 0;
    double flops = 0;
    for (const auto& [name, op] : skewed)
      if (const auto* g = std::get_if<GemmOp>(&op)) {
        ++gemms, flops += g->problem.flops();
        CHECK(name.find(".rows") == std::string::npos);
        CHECK(g->problem.ragged());
        CHECK(g->problem.batch == 2);
        CHECK(g->problem.ragged_k == (name.find("backward_weight") != std::string::npos));
      }
    CHECK(gemms == (backward ? 6 : 3));  // w1, w3, w2; backward each twice
    // The same rows as batched GEMMs, one per load: the same FLOPs, in twice the kernels.
    const Scenario s = parse(moe_step(2, 4, 2, R"(["tp", "ep", "fsdp"])", R"("expert_load": [3, 1, 1, 1, 1, 1, 1, 1])"));
    double batched = 0;
    int kernels = 0;
    for (const auto& [name, op] : busiest_rank_expert_ops(s.workload.step, s.dtype, backward, 1))
      if (const auto* g = std::get_if<GemmOp>(&op)) batched += g->problem.flops(), ++kernels;
    CHECK(kernels == (backward ? 8 : 4));  // per load: gate and up as one GEMM, then down
    CHECK(flops == Approx(batched).epsilon(1e-12));
  }
}

TEST_CASE("in one grouped GEMM an expert no token chose adds no tiles", "[step][ep]") {
  const auto gemm_of = [&](const std::string& load) {
    const Scenario s = parse(moe_step(2, 4, 2, R"(["tp", "ep", "fsdp"])", R"("expert_gemm": "grouped_mm", "expert_load": )" + load));
    for (const auto& [name, op] : busiest_rank_expert_ops(s.workload.step, s.dtype, false, 1))
      if (const auto* g = std::get_if<GemmOp>(&op)) return g->problem;
    throw std::logic_error("no expert GEMM");
  };
  // Experts 0 and 1 on the busiest rank: 3 parts and none.
  const GemmProblem p = gemm_of("[3, 0, 1, 1, 1, 1, 1, 1]");
  REQUIRE(p.ragged());
  CHECK(p.group_sizes[1] == 0);
  const GemmPlan plan = plan_gemm(p, test::h100());
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  CHECK(plan.tiles == ceil_div(p.group_sizes[0], plan.tile.m) * ceil_div(p.n, plan.tile.n));
  CHECK(p.flops() == Approx(2.0 * static_cast<double>(p.group_sizes[0]) * static_cast<double>(p.n) * static_cast<double>(p.k)));
}
