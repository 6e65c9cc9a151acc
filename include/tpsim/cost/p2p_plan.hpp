#pragma once
// NCCL's grouped send/recv as its host code plans it (NCCL 2.20-2.21: src/enqueue.cc
// scheduleP2pTasksToPlan, calcP2pChunkSize, addP2pToPlan; src/include/channel.h): which
// protocol a message takes and how many channel blocks the kernel launches, each block an
// SM held for the kernel's life.
//
// A send to the peer d ranks ahead and the receive from the peer d ranks behind share a
// round; inside a node both start on the same channel (the round's bits mirrored in the p2p
// channel space), across nodes each on its own (node distance + in-node step / 8);
// a message is cut into parts of one chunk each (at least the minimum channels a round may
// use, more while a chunk would exceed the largest), part k on the round's channel + k.
// The kernel's grid is the channels any part landed on. A round of distance 0 is a rank's
// send to itself: NCCL plans it as any other round and its kernel copies it (no link).
//
// Each channel's block moves its parts through NCCL's send, receive and copy loops
// (NCCL 2.30.7 src/device/sendrecv.h: a block's warps are split among the works it holds), so a block
// that holds more bytes than the others ends last however fast the links are.
#include <vector>

#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

// One round of a rank's grouped send/recv: the peer `distance` ranks ahead in the group
// (1 .. ranks-1), whose message (and the one received from `distance` behind) is `bytes`;
// distance 0: the copy to itself. `received`: what comes from `distance` behind where it
// differs (an uneven all-to-all); below 0, as much as is sent.
struct P2pRound {
  int distance = 1;
  double bytes = 0;
  double received = -1;
};

// Where the group sits: `ranks` GPUs, `per_node` of them in each node (all in one when
// `per_node` >= ranks), and the planning rank's place in it (its channels depend on it
// only across nodes).
struct P2pGroup {
  int ranks = 2;
  int per_node = 2;
  int rank = 0;
  bool crosses_nodes() const { return per_node < ranks; }
};

struct P2pPlan {
  const NcclProtocol* protocol = nullptr;  // LL up to the threshold, Simple above: never LL128
  int blocks = 0;                          // channels with a part: the kernel's grid
  double busiest_block_bytes = 0;          // what the most loaded block sends, receives and copies
                                           // to and from peers in its node
};

// Channels one message of `bytes` is cut into (calcP2pChunkSize's parts).
int p2p_parts(double bytes, const P2pGroup& group, const NcclSpec& nccl);

P2pPlan plan_p2p(const std::vector<P2pRound>& rounds, const P2pGroup& group, const NcclSpec& nccl);

// How long the busiest block takes to move its bytes at nccl.p2p.channel_bandwidth; 0
// where the hardware model does not give that rate.
Tick p2p_processing_time(const P2pPlan& plan, const NcclSpec& nccl);

}  // namespace tpsim
