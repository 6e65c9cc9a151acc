// FlashAttention-2 (PyTorch SDPA's flash backend) beside the hardware's newest flash kernel.
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/cost/attention_cost.hpp"
#include "tpsim/strategies/flash_attention.hpp"
#include "tpsim/step/kernels_alone.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string layer(const std::string& hardware, const std::string& extra) {
  return fmt::format(R"({{"hardware": "{}", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "transformer_layer", "model": "llama3_8b", "tokens": 16384, "seq_len": 8192, "pass": "forward_backward"{}}}}})",
                     hardware, extra);
}

}  // namespace

TEST_CASE("FlashAttention-2 runs a compute-bound attention at its own fraction of peak: slower by the ratio of efficiencies",
          "[attention][flash2]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.attention.has(AttentionKernel::flash2));
  for (const bool backward : {false, true}) {
    AttentionOp fa3{16384, 8192, 32, 8, 128, true, backward, Dtype::bf16};
    AttentionOp fa2 = fa3;
    fa2.kernel = AttentionKernel::flash2;
    const double t3 = to_us(kernels_alone({{"fa3", fa3}}, hw)), t2 = to_us(kernels_alone({{"fa2", fa2}}, hw));
    const double ratio = backward ? hw.attention.backward_efficiency / hw.attention.flash2_backward_efficiency
                                  : hw.attention.forward_efficiency / hw.attention.flash2_forward_efficiency;
    INFO(fmt::format("backward {}: FA3 {:.0f} us, FA2 {:.0f} us", backward, t3, t2));
    CHECK(t2 / t3 == Approx(ratio).epsilon(0.03));
    // Same FLOPs either way: only the rate differs.
    CHECK(attention_flops(fa2) == attention_flops(fa3));
  }
}

TEST_CASE("The flash2 attention choice slows a layer's attention only, and needs the hardware's FlashAttention-2 figures",
          "[attention][flash2][input]") {
  const double fa3 = makespan_us(simulate(layer("h100_sxm", "")), "baseline");
  const double fa2 = makespan_us(simulate(layer("h100_sxm", R"(, "attention": "flash2")")), "baseline");
  CHECK(fa2 > fa3);
  CHECK(scenario_error(layer("b200", R"(, "attention": "flash2")"))
            .find("$.workload.attention: \"flash2\": hardware b200 gives no FlashAttention-2 efficiencies") != std::string::npos);
  CHECK(scenario_error(layer("h100_sxm", R"(, "attention": "flash2", "attention_dropout": 0.1)")).find("\"unfused\" only") !=
        std::string::npos);
  const std::string step = R"({"hardware": "b200", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 1, "mesh": {"fsdp": 8},
                   "attention": "flash2"}})";
  CHECK(scenario_error(step).find("$.workload.attention") != std::string::npos);
}

TEST_CASE("Causal FlashAttention-2 hands out its query tiles light to heavy: few heads end on a tail, the backward does not",
          "[attention][flash2]") {
  const HardwareSpec& hw = h100();
  // One sequence of 8192 over 8 query heads (Llama 3 70B's per-rank heads at TP 8): 512 tiles.
  AttentionOp fwd{8192, 8192, 8, 1, 128, true, false, Dtype::bf16};
  fwd.kernel = AttentionKernel::flash2;
  const AttentionPlan plan = plan_attention(fwd, hw);
  REQUIRE(plan.tiles_per_sequence == 64);
  // The tiles' work sums to the kernel's FLOPs: the shares average 1.
  double flops = 0;
  for (std::int64_t b = 0; b < plan.blocks; ++b)
    flops += static_cast<double>(attention_block_work_at(plan, b, hw).compute) / static_cast<double>(attention_block_work(plan, hw).compute);
  CHECK(flops / static_cast<double>(plan.blocks) == Approx(1.0).epsilon(0.002));
  // Forward: tile j of a head reads j + 1 key tiles, the heaviest of the last head come last.
  CHECK(attention_block_work_at(plan, 63, hw).compute > 60 * attention_block_work_at(plan, 0, hw).compute);
  CHECK(attention_block_work_at(plan, 64, hw).compute == attention_block_work_at(plan, 0, hw).compute);
  AttentionOp full = fwd;
  full.causal = false;  // every tile the same: half the causal's time would be no tail at all
  const double causal_us = to_us(kernels_alone({{"causal", fwd}}, hw)), full_us = to_us(kernels_alone({{"full", full}}, hw));
  INFO(fmt::format("causal {:.0f} us, full {:.0f} us", causal_us, full_us));
  CHECK(causal_us > 0.58 * full_us);  // measured on an H100: 592 against 802 us (0.74)
  // Backward: key tile j meets n - j query tiles, heaviest first, so the tail is short.
  AttentionOp bwd = fwd, bwd_full = full;
  bwd.backward = bwd_full.backward = true;
  REQUIRE(plan_attention(bwd, hw).heavy_first);
  const double ratio_bwd = to_us(kernels_alone({{"b", bwd}}, hw)) / to_us(kernels_alone({{"bf", bwd_full}}, hw));
  CHECK(ratio_bwd < causal_us / full_us);
  // FlashAttention-3 (the hardware's own kernel) keeps the average per tile.
  AttentionOp fa3 = fwd;
  fa3.kernel = AttentionKernel::newest;
  CHECK(plan_attention(fa3, hw).tiles_per_sequence == 0);
}

TEST_CASE("FlashAttention-2's backward is three kernels: two memory-bound ones around the flash kernel, linear in the tokens",
          "[attention][flash2]") {
  const HardwareSpec& hw = h100();
  AttentionOp bwd{16384, 2048, 32, 8, 128, true, true, Dtype::bf16};
  bwd.kernel = AttentionKernel::flash2;
  const auto ks = flash_attention_kernels(bwd, "core");
  REQUIRE(ks.size() == 3);
  CHECK(ks[0].first == "core.dot_do_o");
  CHECK(std::holds_alternative<AttentionOp>(ks[1].second));
  CHECK(ks[2].first == "core.convert_dq");
  // dot_do_o reads dO and O (bf16) and clears the fp32 dQ accumulator; convert_dq reads that
  // accumulator and writes dQ: bytes per token and head, whatever the sequence length.
  const auto& pre = std::get<ElementwiseOp>(ks[0].second);
  const auto& post = std::get<ElementwiseOp>(ks[2].second);
  const double rows = 16384.0 * 32;
  CHECK(pre.bytes_read == Approx(rows * 128 * 2 * 2));
  CHECK(pre.bytes_written == Approx(rows * 4 + rows * 128 * 4));
  CHECK(post.bytes_read == Approx(rows * 128 * 4));
  CHECK(post.bytes_written == Approx(rows * 128 * 2));
  // The same tokens in sequences 4x as long: the flash kernel's work grows 4x, theirs not at all.
  AttentionOp longer = bwd;
  longer.seq_len = 8192;
  const auto kl = flash_attention_kernels(longer, "core");
  CHECK(std::get<ElementwiseOp>(kl[0].second).bytes_read == pre.bytes_read);
  const double extra_short = to_us(kernels_alone({ks[0], ks[2]}, hw));
  CHECK(extra_short / to_us(kernels_alone({ks[1]}, hw)) > 3 * extra_short / to_us(kernels_alone({kl[1]}, hw)));
  // The forward, and FlashAttention-3, stay one kernel.
  AttentionOp fwd = bwd;
  fwd.backward = false;
  CHECK(flash_attention_kernels(fwd, "core").size() == 1);
  AttentionOp fa3 = bwd;
  fa3.kernel = AttentionKernel::newest;
  CHECK(flash_attention_kernels(fa3, "core").size() == 1);
}

TEST_CASE("cuDNN's fused attention (SDPA's cuDNN backend): its own rates, three kernels backward as FlashAttention-2's, and "
          "refused where the hardware gives no rates for it",
          "[attention][cudnn][input]") {
  const HardwareSpec& hw = h100();
  REQUIRE(hw.attention.has(AttentionKernel::cudnn));
  AttentionOp fwd{16384, 8192, 32, 32, 128, true, false, Dtype::bf16};
  fwd.kernel = AttentionKernel::cudnn;
  // Compute-bound: never faster than its FLOPs at the cuDNN rate, and within the last wave's
  // tail and the blocks' prologues of it (4,096 blocks over 132 SMs).
  const double us = to_us(kernels_alone({{"cudnn", fwd}}, hw));
  const double ideal = attention_flops(fwd) / (hw.peak_flops_per_ps[static_cast<int>(Dtype::bf16)] * hw.attention.cudnn_forward_efficiency) / 1e6;
  CHECK(us >= ideal);
  CHECK(us <= 1.1 * ideal);
  AttentionOp bwd = fwd;
  bwd.backward = true;
  const auto ks = flash_attention_kernels(bwd, "core");
  REQUIRE(ks.size() == 3);
  CHECK(ks[0].first == "core.dot_do_o");
  CHECK(ks[2].first == "core.convert_dq");
  CHECK(flash_attention_kernels(fwd, "core").size() == 1);
  // A layer or step that asks for it on hardware without cuDNN's rates is one line naming the key.
  CHECK(scenario_error(layer("b200", R"(, "attention": "cudnn")"))
            .find("$.workload.attention: \"cudnn\": hardware b200 gives no cuDNN attention efficiencies") != std::string::npos);
  CHECK(makespan_us(simulate(layer("h100_sxm", R"(, "attention": "cudnn")")), "baseline") > 0);
}
