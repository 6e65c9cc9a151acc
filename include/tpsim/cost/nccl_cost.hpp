#pragma once
// NCCL ring collectives inside one node: which protocol and how many channels
// NCCL picks for a message, the fixed latency, and the payload rate cap.
// The bytes themselves move over the simulated fabric.
#include <cstdint>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

enum class CollectiveKind { all_gather, reduce_scatter };

struct RingPlan {
  const NcclProtocol* protocol = nullptr;
  int channels = 0;
  Tick latency = 0;              // base + (ranks-1) x per-hop
  double bytes_per_rank = 0;     // what each rank sends to its ring successor: (n-1)/n of the buffer
  double rate_cap_bytes_per_ps = 0;  // payload rate the protocol sustains on one port
};

// `buffer_bytes`: the whole gathered buffer (all-gather output, reduce-scatter input).
RingPlan plan_ring(CollectiveKind kind, double buffer_bytes, int ranks, const HardwareSpec& hw);

// NCCL's own estimate (latency + bytes / bandwidth) for a protocol, used to choose it.
Tick ring_estimate(const NcclProtocol& proto, double buffer_bytes, int ranks, const HardwareSpec& hw);

}  // namespace tpsim
