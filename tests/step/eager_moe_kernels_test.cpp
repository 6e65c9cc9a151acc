#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/eager_moe_kernels.hpp"
#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/layer_costs.hpp"

using namespace tpsim;

namespace {

// DeepSeek-V3 16B's MoE on one of 8 EP ranks: 16,384 tokens, top 6 of 64, hidden 2048.
EagerMoeShape deepseek_16b(double top_k = 6) {
  EagerMoeShape s;
  s.tokens = 16384, s.slots = s.tokens * top_k, s.computed = s.slots, s.hidden = 2048, s.experts = 64;
  s.local_experts = 8, s.e = 2;
  return s;
}

double written(const NamedKernels& ks) {
  double b = 0;
  for (const auto& [name, op] : ks) b += op.bytes_written;
  return b;
}
double moved(const NamedKernels& ks) {
  double b = 0;
  for (const auto& [name, op] : ks) b += op.bytes_read + op.bytes_written;
  return b;
}
ElementwiseOp kernel(const NamedKernels& ks, const std::string& name) {
  for (const auto& [n, op] : ks)
    if (n == name) return op;
  FAIL("no kernel " << name);
  return {};
}
Tick alone(const NamedKernels& ks, const HardwareSpec& hw) {
  std::vector<std::pair<std::string, OpPayload>> ops;
  for (const auto& [name, op] : ks) ops.push_back({name, op});
  return kernels_alone(ops, hw);
}

std::string moe_step(const std::string& elementwise, int top_k, const std::string& checkpoint = "none") {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "seq_len": 4096, "local_batch": 2,
                    "model": {{"hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_heads": 16, "head_dim": 128, "layers": 2,
                               "vocab": 32000, "experts": 64, "top_k": {}, "expert_ffn_hidden": 1408, "shared_experts": 2}},
                    "mesh": {{"ep": 8}}, "activation_checkpoint": "{}", "elementwise": "{}"}},
      "variants": ["baseline"]}})",
                     top_k, checkpoint, elementwise);
}
Scenario parse(const std::string& json) { return parse_scenario(Json::parse(json), ""); }

}  // namespace

TEST_CASE("eager MoE's weighted sum writes each slot in fp32 twice and in bf16 twice, the tokens once", "[step][moe][eager]") {
  const EagerMoeShape s = deepseek_16b();
  const double n = s.slots * s.hidden;
  // .to(float32), * scores, .to(bf16), then the clone of the shared experts' output and the
  // scatter_add into it: conservation of what each op produces.
  CHECK(written(eager_moe_combine_kernels(s, false)) == Approx(n * (4 + 4 + 2 + 2) + s.tokens * s.hidden * 2));
  // Backward produces the scores' gradient too: more than the forward moves.
  CHECK(moved(eager_moe_combine_kernels(s, true)) > moved(eager_moe_combine_kernels(s, false)));
}

TEST_CASE("eager MoE's per-slot kernels grow with top_k, the router's per-token ones do not", "[step][moe][eager]") {
  const EagerMoeShape three = deepseek_16b(3), six = deepseek_16b(6);
  for (bool backward : {false, true}) {
    // The weighted sum and the expert-order permutations move slot rows: twice the slots,
    // all but the token-sized clone and zero fills twice the bytes.
    CHECK(moved(eager_moe_combine_kernels(six, backward)) / moved(eager_moe_combine_kernels(three, backward)) == Approx(2).epsilon(0.05));
    CHECK(moved(eager_moe_permute_kernels(six, backward)) / moved(eager_moe_permute_kernels(three, backward)) == Approx(2).epsilon(0.05));
    CHECK(moved(eager_moe_unpermute_kernels(six, backward)) / moved(eager_moe_unpermute_kernels(three, backward)) ==
          Approx(2).epsilon(0.05));
  }
  // The router's softmax reads every token's scores over all experts, whatever top_k is.
  CHECK(kernel(eager_moe_route_kernels(six, false), "router.softmax").bytes_read ==
        kernel(eager_moe_route_kernels(three, false), "router.softmax").bytes_read);
}

TEST_CASE("an atomic scatter_add of the slot rows takes longer than the vectorized gather of the same rows", "[step][moe][eager]") {
  const HardwareSpec& hw = test::h100();
  const EagerMoeShape s = deepseek_16b();
  const NamedKernels f = eager_moe_route_kernels(s, false), b = eager_moe_route_kernels(s, true);
  const ElementwiseOp gather = kernel(f, "slots.gather");
  const ElementwiseOp scatter = kernel(b, "slots.gather.backward.scatter_add");
  // The same rows each way: one per slot.
  CHECK(gather.bytes_written == Approx(scatter.bytes_written));
  CHECK(alone({{"scatter_add", scatter}}, hw) > alone({{"gather", gather}}, hw));
  // index_put_ (the way back into token order) runs ATen's per-element loop too.
  const ElementwiseOp put = kernel(eager_moe_unpermute_kernels(s, false), "ep.index_put");
  const ElementwiseOp index = kernel(eager_moe_permute_kernels(s, false), "ep.index");
  CHECK(alone({{"index_put", put}}, hw) > alone({{"index", index}}, hw));
  // Each in its own ATen kernel's loop.
  CHECK(scatter.loop == ElementLoop::scatter);
  CHECK(kernel(eager_moe_combine_kernels(s, false), "combine.scatter_add").loop == ElementLoop::scatter);
  CHECK(put.loop == ElementLoop::index);
  CHECK(index.loop == ElementLoop::vectorized);
}

TEST_CASE("the expert-order padding adds at most 8 rows per local expert", "[step][moe][eager]") {
  const EagerMoeShape s = deepseek_16b();  // 8 local experts of 64
  CHECK(s.padded() >= s.computed);
  CHECK(s.padded() <= s.computed + 8 * 8 + 8);
  CHECK(static_cast<long>(s.padded()) % 8 == 0);
}

TEST_CASE("eager torchtitan's MoE layer costs more than fused passes, by more with more slots, and is rerun by the per-op policy",
          "[step][moe][eager]") {
  const auto layer = [](const std::string& elementwise, int top_k, const std::string& checkpoint) {
    const Scenario sc = parse(moe_step(elementwise, top_k, checkpoint));
    return simulate_moe_layer(sc.workload.step, sc.hardware, sc.dtype, false);
  };
  const MoeLayerCost fused2 = layer("fused", 2, "none"), aten2 = layer("aten", 2, "none");
  const MoeLayerCost fused6 = layer("fused", 6, "none"), aten6 = layer("aten", 6, "none");
  CHECK(aten2.forward > fused2.forward);
  CHECK(aten2.backward > fused2.backward);
  CHECK(aten6.forward - fused6.forward > aten2.forward - fused2.forward);
  CHECK(aten6.backward - fused6.backward > aten2.backward - fused2.backward);
  // The all-to-alls carry the same slots either way.
  CHECK(aten6.forward_all_to_all == fused6.forward_all_to_all);
  // Under torchtitan's per-op policy the routed pass but its all-to-alls is rerun: the eager
  // kernels with it.
  const Scenario op_aten = parse(moe_step("aten", 6, "selective_op")), op_fused = parse(moe_step("fused", 6, "selective_op"));
  const LayerCosts a = simulate_layer_costs(op_aten, "baseline"), f = simulate_layer_costs(op_fused, "baseline");
  REQUIRE(a.moe.has_value());
  REQUIRE(f.moe.has_value());
  CHECK(a.moe->recompute - f.moe->recompute >= (aten6.forward - aten6.forward_all_to_all) - (fused6.forward - fused6.forward_all_to_all));
}
