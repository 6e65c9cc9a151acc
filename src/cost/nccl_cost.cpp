#include "tpsim/cost/nccl_cost.hpp"

#include <algorithm>
#include <cmath>

namespace tpsim {

namespace {
// What each rank sends to its ring successor: one buffer share per step.
double ring_bytes_per_rank(CollectiveKind kind, double buffer_bytes, int ranks) {
  return buffer_bytes * ring_steps(kind, ranks) / ranks;
}
}  // namespace

Tick ring_estimate(const NcclProtocol& proto, CollectiveKind kind, double buffer_bytes, int ranks, double link_bytes_per_ps) {
  return proto.base_latency + ring_steps(kind, ranks) * proto.step_latency +
         duration_for(ring_bytes_per_rank(kind, buffer_bytes, ranks), link_bytes_per_ps * proto.bandwidth_efficiency);
}

RingPlan plan_ring(CollectiveKind kind, double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps) {
  RingPlan plan;
  Tick best = kTickMax;
  for (const NcclProtocol& proto : hw.nccl.protocols) {
    const Tick t = ring_estimate(proto, kind, buffer_bytes, ranks, link_bytes_per_ps);
    if (t < best) best = t, plan.protocol = &proto;
  }
  const NcclProtocol& p = *plan.protocol;
  // NCCL drops a channel while the message is under channels x threads x threshold bytes.
  const double per_channel = p.threads * p.channel_threshold;
  plan.channels = static_cast<int>(std::clamp(std::floor(buffer_bytes / per_channel), 1.0,
                                              static_cast<double>(hw.nccl.max_channels)));
  plan.latency = hw.nccl.ring_startup + p.base_latency + ring_steps(kind, ranks) * p.step_latency;
  plan.bytes_per_rank = ring_bytes_per_rank(kind, buffer_bytes, ranks);
  return plan;
}

}  // namespace tpsim
