#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/training_step.hpp"
#include "tpsim/strategies/eager_kernels.hpp"

using namespace tpsim;

namespace {

double moved(const NamedKernels& ks) {
  double b = 0;
  for (const auto& [name, op] : ks) b += op.bytes_read + op.bytes_written;
  return b;
}
double fp32_written(const NamedKernels& ks, double n) {
  double b = 0;
  for (const auto& [name, op] : ks) b += op.bytes_written >= 4 * n ? op.bytes_written : 0;
  return b;
}

std::string step(const std::string& extra) {
  return fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {{"fsdp": 8}},
                    "activation_checkpoint": "selective_op"{}}}, "variants": ["baseline"]}})",
                     extra.empty() ? "" : ", " + extra);
}
double step_ms(const std::string& json) {
  return static_cast<double>(run_training_step(parse_scenario(Json::parse(json), "")).runs.at(0).sim.makespan) * 1e-9;
}

}  // namespace

TEST_CASE("eager RMSNorm moves nine times a fused norm's bytes forward, more backward", "[strategies][eager]") {
  const double n = 1 << 24, rows = 4096, e = 2;
  const NamedKernels f = aten_rmsnorm_kernels(n, rows, e, false), b = aten_rmsnorm_kernels(n, rows, e, true);
  CHECK(f.size() == 8);  // float, pow, mean, + eps, rsqrt, x * rsqrt, type_as, * weight
  // 36 bytes per element (the per-row vectors aside) against a fused kernel's read + write of 2 each.
  CHECK(moved(f) / n == Approx(36).epsilon(0.01));
  CHECK(moved(f) / (2 * n * e) == Approx(9).epsilon(0.01));
  CHECK(moved(b) > 2 * moved(f));
  // Between the up-cast and the down-cast every fp32 tensor written is read again (x.float() twice).
  double read32 = 0, written32 = 0;
  for (const auto& [name, op] : f) {
    read32 += op.bytes_read >= 4 * n ? 4 * n * std::floor(op.bytes_read / (4 * n)) : 0;
    written32 += op.bytes_written >= 4 * n ? op.bytes_written : 0;
  }
  CHECK(read32 == Approx(written32 + 4 * n));
  CHECK(fp32_written(f, n) == Approx(3 * 4 * n));  // float, pow, x * rsqrt
}

TEST_CASE("eager RoPE up-casts, rotates and down-casts both ways", "[strategies][eager]") {
  const double n = 1 << 20;
  for (bool backward : {false, true}) {
    const NamedKernels k = aten_rope_kernels(n, 2, backward);
    CHECK(k.size() == 3);
    CHECK(moved(k) / n == Approx(20));
    CHECK(k.front().second.bytes_read == 2 * n);
    CHECK(k.back().second.bytes_written == 2 * n);
  }
  // SwiGLU eager: silu and mul apart (10 bytes per element) where fused reads two and writes one (6).
  CHECK(moved(aten_swiglu_kernels(n, 2, false)) / n == Approx(10));
  CHECK(moved(aten_swiglu_kernels(n, 2, true)) > moved(aten_swiglu_kernels(n, 2, false)));
}

TEST_CASE("a step with eager aten kernels is slower than fused, and compile is refused with them", "[strategies][eager][step]") {
  const double fused = step_ms(step("")), aten = step_ms(step(R"("elementwise": "aten")")), compiled = step_ms(step(R"("compile": true)"));
  CHECK(aten > 1.1 * fused);  // two RMSNorms, RoPE and SwiGLU per layer, forward, recompute and backward
  CHECK(compiled <= fused);
  CHECK(test::scenario_error(step(R"("elementwise": "aten", "compile": true)")).find("$.workload.elementwise") != std::string::npos);
  CHECK(test::scenario_error(step(R"("elementwise": "eager")")).find("$.workload.elementwise") != std::string::npos);
}
