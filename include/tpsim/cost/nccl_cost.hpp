#pragma once
// NCCL ring collectives inside one node: which protocol and how many channels
// NCCL picks for a message, the fixed latency, and the payload rate cap.
// The bytes themselves move over the simulated fabric.
#include <cstdint>
#include <string_view>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

enum class CollectiveKind { all_gather, reduce_scatter };

inline std::string_view collective_kind_name(CollectiveKind k) {
  return k == CollectiveKind::all_gather ? "all_gather" : "reduce_scatter";
}

struct RingPlan {
  const NcclProtocol* protocol = nullptr;
  int channels = 0;
  Tick latency = 0;              // base + (ranks-1) x per-hop
  double bytes_per_rank = 0;     // what each rank sends to its ring successor: (n-1)/n of the buffer
};

// `buffer_bytes`: the whole gathered buffer (all-gather output, reduce-scatter input);
// `link_bytes_per_ps`: the narrowest hop of the ring. Each hop's transfer is capped
// at the protocol's payload efficiency times that hop's own bandwidth.
// All-gather and reduce-scatter rings move the same bytes with the same steps.
RingPlan plan_ring(double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps);

// NCCL's own estimate (latency + bytes / bandwidth) for a protocol, used to choose it.
Tick ring_estimate(const NcclProtocol& proto, double buffer_bytes, int ranks, double link_bytes_per_ps);

}  // namespace tpsim
