#include "tpsim/step/optimizer_step.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tpsim/step/kernels_alone.hpp"

namespace tpsim {

namespace {

// aten/src/ATen/native/cuda/MultiTensorApply.cuh: a launch takes at most 320 blocks of a
// 65536-element chunk each, so a pass over a shard is one launch per ~21M parameters.
constexpr double kElementsPerLaunch = 65536.0 * 320.0;

}  // namespace

std::vector<OptimizerPass> optimizer_passes(OptimizerImpl impl) {
  // clip_grad_norm_(foreach=True) (torch/nn/utils/clip_grad.py): _foreach_norm, then
  // _foreach_mul_ by the clip coefficient.
  std::vector<OptimizerPass> p = {{"clip.norm", 4, 0}, {"clip.scale", 4, 4}};
  if (impl == OptimizerImpl::fused) {
    // _fused_adamw_: parameter, gradient, both moments read; parameter and moments written.
    p.push_back({"adamw.fused", 16, 12});
    return p;
  }
  // torch/optim/adam.py _multi_tensor_adam with decoupled weight decay, not capturable: each
  // foreach op a pass of its own (addcmul and addcdiv read three lists).
  p.insert(p.end(), {{"adamw.decay", 4, 4},    {"adamw.lerp_exp_avg", 8, 4}, {"adamw.mul_exp_avg_sq", 4, 4},
                     {"adamw.addcmul", 12, 4}, {"adamw.sqrt", 4, 4},         {"adamw.div", 4, 4},
                     {"adamw.add_eps", 4, 4},  {"adamw.addcdiv", 12, 4}});
  return p;
}

Tick optimizer_step_time(const HardwareSpec& hw, double params, OptimizerImpl impl) {
  if (params <= 0) return 0;
  const double launches = std::max(1.0, std::ceil(params / kElementsPerLaunch));
  const double each = params / launches;
  // Every pass's `n` launches, back to back on one stream.
  const auto passes = [&](int n) {
    std::vector<std::pair<std::string, OpPayload>> ops;
    for (const OptimizerPass& pass : optimizer_passes(impl))
      for (int i = 0; i < n; ++i) ops.emplace_back(pass.name, ElementwiseOp{pass.read * each, pass.written * each});
    return kernels_alone(ops, hw);
  };
  const Tick one = passes(1);
  if (launches == 1) return one;
  // The launches of a pass are alike: each one more adds the same kernels and gaps, so two are
  // simulated and the rest follow (no op graph grows with the shard).
  const Tick more = passes(2) - one;
  return duration_for(static_cast<double>(one) + (launches - 1) * static_cast<double>(more), 1.0);
}

}  // namespace tpsim
