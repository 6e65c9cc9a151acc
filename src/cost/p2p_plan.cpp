#include "tpsim/cost/p2p_plan.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace tpsim {

namespace {

// Send/recv work elements a block may hold in one round, halved (src/include/channel.h's
// p2pGroupSize: NCCL_MAX_WORK_ELEMENTS_P2P / 2, 16 / 2 in NCCL 2.19-2.21).
constexpr int kP2pGroupSize = 8;

// src/graph/topo.h mirrorBits: the round's channel, spread over the channel space.
int mirror_bits(int value, int pow2) {
  int mirror = 0;
  for (int b = 1, mb = pow2 >> 1; b < pow2; b <<= 1, mb >>= 1)
    if (value & b) mirror |= mb;
  return mirror;
}

// p2pnChannelsPerPeer: a communicator across nodes takes its network peers' count, 2 per
// NIC halved while they would overload the channel space (src/graph/paths.cc).
int channels_per_peer(const P2pGroup& g, const P2pSpec& p) {
  if (!g.crosses_nodes()) return p.channels_per_peer;
  int net = p.channels_per_net_peer;
  while (net * g.ranks > p.channels * 4 && net > 1) net /= 2;
  return std::min(p.channels_per_peer, net);
}

const NcclProtocol& protocol_named(const NcclSpec& nccl, const char* name) {
  for (const NcclProtocol& p : nccl.protocols)
    if (p.name == name) return p;
  throw std::logic_error("NCCL send/recv needs the LL and Simple protocols (the hardware loader requires them)");
}

}  // namespace

int p2p_parts(double bytes, const P2pGroup& g, const NcclSpec& nccl) {
  const P2pSpec& p = nccl.p2p;
  if (!(bytes > 0)) return 1;  // a zero-byte send/recv is still one work element (a sync)
  const int per_peer = channels_per_peer(g, p);
  int min_channels = per_peer;
  while (min_channels * g.ranks > p.channels && min_channels > 1) min_channels /= 2;
  const double step = g.crosses_nodes() ? p.net_chunk_bytes : p.chunk_bytes;
  const double min_size = g.crosses_nodes() ? step / 2 : step / 8;
  const double max_size = g.crosses_nodes() ? step : step * 32;
  double size = std::max(min_size, std::ceil(bytes / min_channels));
  for (int channels = min_channels; size > max_size && channels <= per_peer / 2;) {
    channels *= 2;
    size = std::ceil(bytes / channels);
  }
  const double chunk = std::ceil(size / min_size) * min_size;
  const double parts = std::ceil(bytes / chunk);
  if (!(parts < 1e9)) throw std::overflow_error("send/recv message cut into more parts than a count holds");
  return static_cast<int>(parts);
}

P2pPlan plan_p2p(const std::vector<P2pRound>& rounds, const P2pGroup& g, const NcclSpec& nccl) {
  const P2pSpec& p = nccl.p2p;
  if (g.ranks < 2 || g.per_node < 1 || p.channels < 1) throw std::logic_error("send/recv planned for fewer than 2 ranks");
  P2pPlan plan;
  double largest = 0;
  std::set<int> used;
  const int per_node = std::min(g.per_node, g.ranks);
  const int nodes = (g.ranks + per_node - 1) / per_node;
  const int per_peer = channels_per_peer(g, p);
  // Channel base of a message from `from` to `to` (ncclChannelComputeBase, as both ends
  // compute it): the in-node step from the sender's local index to the receiver's, and the
  // node distance.
  const auto base_of = [&](int from, int to) {
    const int step = ((to % per_node) - (from % per_node) + per_node) % per_node;
    const int delta = ((to / per_node) - (from / per_node) + nodes) % nodes;
    return nodes > 1 ? delta + step / kP2pGroupSize : step;
  };
  const int me = ((g.rank % g.ranks) + g.ranks) % g.ranks;
  for (const P2pRound& r : rounds) {
    largest = std::max(largest, r.bytes);
    const int ahead = (me + r.distance) % g.ranks, behind = ((me - r.distance) % g.ranks + g.ranks) % g.ranks;
    const int parts = std::min(p2p_parts(r.bytes, g, nccl), per_peer);  // part k on channel base + k % per peer
    for (const int base : {base_of(me, ahead), base_of(behind, me)}) {  // the send, the receive
      const int first = mirror_bits(base % p.channels, p.channels);
      for (int k = 0; k < parts; ++k) used.insert((first + k) % p.channels);
    }
  }
  plan.blocks = static_cast<int>(used.size());
  plan.protocol = &protocol_named(nccl, largest <= p.ll_threshold_bytes ? "LL" : "Simple");
  return plan;
}

}  // namespace tpsim
