#include "tpsim/cost/p2p_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
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
  std::map<int, double> on_channel;  // bytes each block moves
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
    if (r.distance < 0 || r.distance >= g.ranks) throw std::logic_error("send/recv round past the group");
    // A message's parts land on the round's channels, part k on base + k; its bytes count
    // against those blocks when the peer shares the node: the block rate is measured on
    // NVLink peers, while for a network peer the block fills a buffer the proxy drains, at a
    // rate not measured here (its channel is still held).
    const auto place = [&](double bytes, int base, int peer) {
      const int parts = std::min(p2p_parts(bytes, g, nccl), per_peer);
      const int first = mirror_bits(base % p.channels, p.channels);
      const double counted = peer / per_node == me / per_node ? bytes / parts : 0.0;
      for (int k = 0; k < parts; ++k) on_channel[(first + k) % p.channels] += counted;
    };
    if (r.distance == 0) {  // the copy to itself: one pass through its blocks, never LL
      place(r.bytes, base_of(me, me), me);
      continue;
    }
    const double received = r.received < 0 ? r.bytes : r.received;
    largest = std::max({largest, r.bytes, received});
    const int ahead = (me + r.distance) % g.ranks, behind = ((me - r.distance) % g.ranks + g.ranks) % g.ranks;
    place(r.bytes, base_of(me, ahead), ahead);     // the send
    place(received, base_of(behind, me), behind);  // the receive
  }
  plan.blocks = static_cast<int>(on_channel.size());
  for (const auto& [channel, bytes] : on_channel) plan.busiest_block_bytes = std::max(plan.busiest_block_bytes, bytes);
  plan.protocol = &protocol_named(nccl, largest <= p.ll_threshold_bytes ? "LL" : "Simple");
  return plan;
}

Tick p2p_processing_time(const P2pPlan& plan, const NcclSpec& nccl) {
  if (!(nccl.p2p.channel_bytes_per_ps > 0)) return 0;
  return duration_for(plan.busiest_block_bytes, nccl.p2p.channel_bytes_per_ps);
}

}  // namespace tpsim
