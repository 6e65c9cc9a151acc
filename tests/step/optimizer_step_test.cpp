// AdamW and gradient clipping at the step's end: memory-bound passes over the shard.
#include "support/catch.hpp"
#include "support/simulate.hpp"

#include "tpsim/step/optimizer_step.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

double bytes_per_param(OptimizerImpl impl) {
  double b = 0;
  for (const OptimizerPass& p : optimizer_passes(impl)) b += p.read + p.written;
  return b;
}

}  // namespace

TEST_CASE("foreach AdamW makes a pass per op: 96 bytes a parameter with clipping against fused's 40, and takes that much longer",
          "[step][optimizer]") {
  CHECK(bytes_per_param(OptimizerImpl::fused) == 40);    // clip's norm (4) and scale (8), fused AdamW (28)
  CHECK(bytes_per_param(OptimizerImpl::foreach) == 96);  // clip (12) and eight foreach ops (84)
  const double params = 2e9;
  const double fused = to_us(optimizer_step_time(h100(), params, OptimizerImpl::fused));
  const double foreach = to_us(optimizer_step_time(h100(), params, OptimizerImpl::foreach));
  // HBM-bound: the ratio of their bytes, within the launch gaps and start-ups.
  CHECK(foreach / fused == Approx(96.0 / 40).epsilon(0.05));
  // At ~3 TB/s: 2e9 x 96 B in about 64 ms.
  CHECK(foreach * 1e-6 * h100().memory.hbm_bytes_per_ps * 1e12 / (params * 96) == Approx(1).margin(0.15));
}

TEST_CASE("the optimizer step is linear in the shard and nothing without one", "[step][optimizer]") {
  const double one = to_us(optimizer_step_time(h100(), 1e9, OptimizerImpl::foreach));
  const double two = to_us(optimizer_step_time(h100(), 2e9, OptimizerImpl::foreach));
  CHECK(two / one == Approx(2).epsilon(0.02));
  CHECK(optimizer_step_time(h100(), 0, OptimizerImpl::fused) == 0);
  // A tiny shard still launches every pass: its kernels' start-ups.
  const double tiny = to_us(optimizer_step_time(h100(), 1, OptimizerImpl::foreach));
  CHECK(tiny >= 10 * to_us(h100().elementwise.block_overhead));
  // Shards of a thousand launches a pass and more (20-40 G parameters) take time in proportion.
  CHECK(to_us(optimizer_step_time(h100(), 4e10, OptimizerImpl::fused)) / to_us(optimizer_step_time(h100(), 2e10, OptimizerImpl::fused)) ==
        Approx(2).epsilon(0.02));
}
