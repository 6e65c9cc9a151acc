#pragma once
// NCCL ring collectives inside one node: which protocol and how many channels
// NCCL picks for a message, the fixed latency, and the payload rate cap.
// The bytes themselves move over the simulated fabric.
#include <cstdint>
#include <string_view>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

enum class CollectiveKind { all_gather, reduce_scatter, all_reduce };

inline std::string_view collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_reduce: return "all_reduce";
  }
  return "?";
}

// Ring steps a rank takes: n-1 for all-gather and reduce-scatter; NCCL's ring all-reduce
// is a reduce-scatter then an all-gather, 2(n-1) (src/graph/tuning.cc: nsteps).
inline int ring_steps(CollectiveKind k, int ranks) { return (k == CollectiveKind::all_reduce ? 2 : 1) * (ranks - 1); }

struct RingPlan {
  const NcclProtocol* protocol = nullptr;
  int channels = 0;
  Tick latency = 0;              // base + steps x per-hop
  double bytes_per_rank = 0;     // what each rank sends to its ring successor: steps/n of the buffer
};

// `buffer_bytes`: the whole gathered buffer (all-gather output, reduce-scatter input,
// the buffer every rank all-reduces); `link_bytes_per_ps`: the narrowest hop of the
// ring. Each hop's transfer is capped at the protocol's payload efficiency times that
// hop's own bandwidth. All-gather and reduce-scatter rings move the same bytes with the
// same steps; an all-reduce moves twice the bytes in twice the steps.
RingPlan plan_ring(CollectiveKind kind, double buffer_bytes, int ranks, const HardwareSpec& hw, double link_bytes_per_ps);

// NCCL's own estimate (latency + bytes / bandwidth) for a protocol, used to choose it.
Tick ring_estimate(const NcclProtocol& proto, CollectiveKind kind, double buffer_bytes, int ranks, double link_bytes_per_ps);

}  // namespace tpsim
