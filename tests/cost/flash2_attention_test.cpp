// FlashAttention-2 (PyTorch SDPA's flash backend) beside the hardware's newest flash kernel.
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/cost/attention_cost.hpp"
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
  REQUIRE(hw.attention.has_flash2());
  for (const bool backward : {false, true}) {
    AttentionOp fa3{16384, 8192, 32, 8, 128, true, backward, Dtype::bf16};
    AttentionOp fa2 = fa3;
    fa2.flash2 = true;
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
