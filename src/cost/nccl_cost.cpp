#include "tpsim/cost/nccl_cost.hpp"

#include <algorithm>
#include <cmath>

namespace tpsim {

Tick ring_estimate(const NcclProtocol& proto, double buffer_bytes, int ranks, double link_bytes_per_ps) {
  const double per_rank = buffer_bytes * (ranks - 1) / ranks;
  return proto.base_latency + (ranks - 1) * proto.step_latency +
         duration_for(per_rank, link_bytes_per_ps * proto.bandwidth_efficiency);
}

RingPlan plan_ring(double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps) {
  RingPlan plan;
  Tick best = kTickMax;
  for (const NcclProtocol& proto : hw.nccl.protocols) {
    const Tick t = ring_estimate(proto, buffer_bytes, ranks, link_bytes_per_ps);
    if (t < best) best = t, plan.protocol = &proto;
  }
  const NcclProtocol& p = *plan.protocol;
  // NCCL drops a channel while the message is under channels x threads x threshold bytes.
  const double per_channel = p.threads * p.channel_threshold;
  plan.channels = static_cast<int>(std::clamp(std::floor(buffer_bytes / per_channel), 1.0,
                                              static_cast<double>(hw.nccl.max_channels)));
  plan.latency = hw.nccl.ring_startup + p.base_latency + (ranks - 1) * p.step_latency;
  plan.bytes_per_rank = buffer_bytes * (ranks - 1) / ranks;
  return plan;
}

}  // namespace tpsim
