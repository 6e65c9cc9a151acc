// What happens once every rank has met at a collective, send/recv or fused step.
// These are group-synchronous: all ranks' kernels finish together.
#include <algorithm>
#include <map>
#include <memory>

#include "machine.hpp"

namespace tpsim::runtime_detail {

void Machine::move_all(std::vector<std::pair<std::pair<int, int>, double>> transfers, PayloadShare share,
                       std::function<void()> done) {
  if (transfers.empty()) return done();
  auto left = std::make_shared<std::size_t>(transfers.size());
  auto finish_one = [left, done] {
    if (--*left == 0) done();
  };
  for (const auto& [route, bytes] : transfers) {
    const auto [src, dst] = route;
    fabric_.start(src, dst, bytes, 0, finish_one, share);
  }
}

void Machine::run_collective(const std::vector<OpId>& members, const CollectivePlan& plan) {
  if (plan.algorithm == NcclAlgorithm::nvls) run_nvls(members, plan);
  else if (plan.algorithm == NcclAlgorithm::nvls_tree) run_nvls_tree(members, plan);
  else run_ring(members, plan);
}

namespace {
// A ring's members grouped by node in ring order, when each node's members are
// consecutive in the ring and every node holds as many; empty otherwise.
std::vector<std::vector<int>> contiguous_nodes(const std::vector<int>& ring, const Topology& topo) {
  std::vector<std::vector<int>> nodes;
  for (int r : ring) {
    if (nodes.empty() || topo.node_of(nodes.back().front()) != topo.node_of(r)) nodes.emplace_back();
    nodes.back().push_back(r);
  }
  if (nodes.size() > 1 && topo.node_of(nodes.back().front()) == topo.node_of(nodes.front().front())) return {};  // wraps into one node
  for (const auto& n : nodes)
    if (n.size() != nodes.front().size()) return {};
  for (std::size_t a = 0; a < nodes.size(); ++a)
    for (std::size_t b = a + 1; b < nodes.size(); ++b)
      if (topo.node_of(nodes[a].front()) == topo.node_of(nodes[b].front())) return {};  // a node visited twice
  return nodes;
}
}  // namespace

// Every rank sends (n-1)/n of the buffer to its ring successor, pipelined over
// the channels; the kernels finish together when the last chunk lands, and not before
// their blocks have processed the buffer (plan.processing). Across nodes NCCL's
// channels are rings that leave each node from a different member: with p members a
// node, channel c enters a node at its member c and leaves from member c-1 through that
// GPU's NIC, so each member's NIC carries 1/p of its bytes and its NVLink (p-1)/p. Where
// the members do not sit in whole nodes one after another, a node-crossing hop's bytes
// are spread over every GPU's NIC (GPU j of one node to GPU j of the next) instead.
void Machine::run_ring(const std::vector<OpId>& members, const CollectivePlan& plan) {
  // The kernels end when the last byte has landed and their blocks have processed the
  // buffer; the blocks work through the pipeline's fill, so that clock starts at once (and
  // cannot bind when it ends before the first byte moves: no event then).
  const bool floor_may_bind = plan.processing > plan.latency;
  auto left = std::make_shared<int>(floor_may_bind ? 2 : 1);
  auto finish = [this, members, left] {
    if (--*left == 0) release_all(members);
  };
  if (floor_may_bind) sim_.schedule_after(plan.processing, finish);
  sim_.schedule_after(plan.latency, [this, members, plan, finish] {
    std::vector<std::pair<std::pair<int, int>, double>> transfers;
    const std::size_t n = members.size();
    const Topology& topo = fabric_.topology();
    std::vector<int> ring;
    for (OpId m : members) ring.push_back(dag_.op(m).rank);
    const auto nodes = contiguous_nodes(ring, topo);
    if (nodes.size() > 1) {
      const std::size_t p = nodes.front().size();
      const double share = plan.bytes_per_rank / static_cast<double>(p);
      for (std::size_t c = 0; c < p; ++c)
        for (std::size_t a = 0; a < nodes.size(); ++a) {
          const auto& here = nodes[a];
          for (std::size_t i = 0; i + 1 < p; ++i) transfers.push_back({{here[(c + i) % p], here[(c + i + 1) % p]}, share});
          const auto& next = nodes[(a + 1) % nodes.size()];
          transfers.push_back({{here[(c + p - 1) % p], next[c]}, share});
        }
      return move_all(std::move(transfers), {plan.efficiency, plan.nic_efficiency}, finish);
    }
    const int per = topo.gpus_per_node();
    for (std::size_t i = 0; i < n && n > 1; ++i) {
      const int src = ring[i], dst = ring[(i + 1) % n];
      if (topo.node_of(src) == topo.node_of(dst)) {
        transfers.push_back({{src, dst}, plan.bytes_per_rank});
        continue;
      }
      for (int j = 0; j < per; ++j)
        transfers.push_back({{topo.node_of(src) * per + j, topo.node_of(dst) * per + j}, plan.bytes_per_rank / per});
    }
    move_all(std::move(transfers), {plan.efficiency, plan.nic_efficiency}, finish);
  });
}

// NVLS inside one NVSwitch: the switch reads every rank's slices to reduce them and
// multicasts each reduced slice to all, so each port carries (n+1)/n of the buffer
// each way. Fabric flows are point to point; spreading each port's bytes evenly over
// the other ranks loads every port in and out by exactly that much (the efficiency is
// on the wire, so a port's n-1 flows carry what one would).
void Machine::run_nvls(const std::vector<OpId>& members, const CollectivePlan& plan) {
  sim_.schedule_after(plan.latency, [this, members, plan] {
    std::vector<std::pair<std::pair<int, int>, double>> transfers;
    const std::size_t n = members.size();
    if (n < 2) return release_all(members);
    const double peers = static_cast<double>(n - 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        if (i != j) transfers.push_back({{dag_.op(members[i]).rank, dag_.op(members[j]).rank}, plan.bytes_per_rank / peers});
    move_all(std::move(transfers), {plan.efficiency, 1.0}, [this, members] { release_all(members); });
  });
}

// NCCL's NVLS tree across nodes: inside each node the NVSwitch traffic of NVLS among the
// node's members; across nodes each member's slice to the member at its place in the next
// node (twice the slice past two nodes: a tree's inner node receives from two children
// and sends to two), so every NIC carries what a tree puts through it. The two tiers
// pipeline; the kernels finish when both have moved their bytes.
void Machine::run_nvls_tree(const std::vector<OpId>& members, const CollectivePlan& plan) {
  sim_.schedule_after(plan.latency, [this, members, plan] {
    const Topology& topo = fabric_.topology();
    std::map<int, std::vector<int>> by_node;  // node -> members in ring order
    for (OpId m : members) by_node[topo.node_of(dag_.op(m).rank)].push_back(dag_.op(m).rank);
    std::vector<std::pair<std::pair<int, int>, double>> inside, across;
    const double peers = static_cast<double>(by_node.begin()->second.size() - 1);  // every node holds as many
    for (auto it = by_node.begin(); it != by_node.end(); ++it) {
      const std::vector<int>& here = it->second;
      for (int a : here)
        for (int b : here)
          if (a != b) inside.push_back({{a, b}, plan.bytes_per_rank / peers});
      const auto next = std::next(it) == by_node.end() ? by_node.begin() : std::next(it);
      for (std::size_t i = 0; i < here.size(); ++i) across.push_back({{here[i], next->second[i]}, plan.nic_bytes_per_rank});
    }
    auto left = std::make_shared<int>(2);
    auto done = [this, members, left] {
      if (--*left == 0) release_all(members);
    };
    move_all(std::move(inside), {plan.efficiency, 1.0}, done);
    move_all(std::move(across), {1.0, plan.nic_efficiency}, done);
  });
}

// NCCL send/recv synchronises sender and receiver; all ranks of a step move together.
// The messages cross the links as NCCL's grouped send/recv moves them; the kernels end
// when the last has landed and every member's busiest block has moved its parts (its
// sends, receives and copy to itself), a clock that starts with the first byte.
void Machine::run_sendrecv(const std::vector<OpId>& members, const NcclProtocol& proto) {
  const Tick latency = proto.base_latency + proto.step_latency;
  Tick processing = 0;
  for (OpId m : members) processing = std::max(processing, sendrecv_processing_[m]);  // planned at each launch
  auto left = std::make_shared<int>(processing > 0 ? 2 : 1);
  auto finish = [this, members, left] {
    if (--*left == 0) release_all(members);
  };
  if (processing > 0) sim_.schedule_after(latency + processing, finish);  // both below 9e18 (duration_for)
  sim_.schedule_after(latency, [this, members, &proto, finish] {
    std::vector<std::pair<std::pair<int, int>, double>> transfers;
    for (OpId m : members)
      for (const Transfer& t : std::get<SendRecvOp>(dag_.op(m).payload).sends)
        transfers.push_back({{dag_.op(m).rank, t.peer}, t.bytes});
    move_all(std::move(transfers), {proto.bandwidth_efficiency, nccl_network_payload_share(proto, hw_.nccl)}, finish);
  });
}

// One step of a persistent fused kernel: the grid computes the step's tiles
// (ceil(tiles / grid) rounds of blocks) while the operand streams to the next
// rank; when both are done everywhere, a signal/wait round starts the next step.
void Machine::run_fused_round(const std::vector<OpId>& members, const GemmPlan& plan, int grid, int round) {
  const auto& first = std::get<FusedRingGemmOp>(dag_.op(members.front()).payload);
  const std::int64_t waves = (plan.blocks + grid - 1) / grid;
  // Each resident block computes `waves` tiles this round, drawing from its GPU's HBM
  // beside whatever else runs there (the round's own transfers included), re-timed as
  // that changes; the round's compute ends when the slowest member's blocks do.
  BlockWork work = gemm_block_work(plan, hw_);
  const auto scale = [waves](Tick t) { return duration_for(static_cast<double>(t) * static_cast<double>(waves), 1.0); };
  work.fixed = scale(work.fixed);
  work.compute = scale(work.compute);
  // A persistent kernel sums split-K's partials itself (no second kernel): its blocks read them back.
  work.bytes = (work.bytes + (plan.reduction_read_bytes + plan.reduction_written_bytes) / static_cast<double>(plan.blocks)) *
               static_cast<double>(waves);
  if (round == 0) work.delay = hw_.gemm.kernel_ramp;
  std::vector<std::pair<std::pair<int, int>, double>> transfers;
  if (round + 1 < first.steps)
    for (OpId m : members) {
      const auto& f = std::get<FusedRingGemmOp>(dag_.op(m).payload);
      transfers.push_back({{dag_.op(m).rank, f.send_to}, f.send_bytes});
    }
  auto left = std::make_shared<int>(2);
  auto step_done = [this, members, plan, grid, round, left, steps = first.steps] {
    if (--*left > 0) return;
    if (round + 1 == steps) return release_all(members);
    sim_.schedule_after(hw_.barrier.latency, [=, this] { run_fused_round(members, plan, grid, round + 1); });
  };
  auto computing = std::make_shared<std::size_t>(members.size());
  for (OpId m : members)
    ranks_[static_cast<std::size_t>(dag_.op(m).rank)].sms->stream_resident(grid, work, [computing, step_done] {
      if (--*computing == 0) step_done();
    });
  move_all(std::move(transfers), {}, step_done);
}

void Machine::release_all(const std::vector<OpId>& members) {
  for (OpId m : members) ranks_[static_cast<std::size_t>(dag_.op(m).rank)].sms->release(kernel_of_[m]);
}

}  // namespace tpsim::runtime_detail
