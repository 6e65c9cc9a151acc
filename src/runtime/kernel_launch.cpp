// Turning ops into kernels on a rank's block scheduler: what blocks they need,
// how long a block takes, and what happens when every block is resident.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "machine.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/cost/l2_writeback.hpp"
#include "tpsim/cost/reduction_cost.hpp"

namespace tpsim::runtime_detail {

namespace {

// A GEMM's ramp across the SMs (launch, first pipeline fill) is dead time for the blocks placed
// first; blocks placed later join a kernel already running, and each pays its own prologue.
std::function<BlockWork()> ramp_on_first_blocks(const BlockWork& work, Tick ramp) {
  return [work, ramp, first = true]() mutable {
    BlockWork w = work;
    w.delay = first ? ramp : 0;
    first = false;
    return w;
  };
}

// A streaming kernel's start-up is its blocks' first loads' round trip: blocks placed later,
// on SMs another kernel gave back, make that round trip too before their bytes flow. Placed
// all at once (the GPU to itself) the kernel pays it once; squeezed onto the few SMs a GEMM
// leaves, it pays it once per round of blocks (a split-K reduction beside the other stream's
// submatmul: 40 us for what takes 2.5 us alone, in the one-rank async TP profiles).
std::function<BlockWork()> start_up_on_every_placement(BlockWork work, Tick start_up) {
  work.delay = start_up;
  return [work] { return work; };
}

// Every block moves its share of what the L2 the kernel found adds (or saves).
std::function<BlockWork()> with_extra_bytes(std::function<BlockWork()> work, double per_block) {
  return [work = std::move(work), per_block] {
    BlockWork w = work();
    w.bytes = std::max(0.0, w.bytes + per_block);
    return w;
  };
}

}  // namespace

void Machine::pass_l2(int rank, double touched, double written) {
  if (!follows_l2()) return;
  RankState& rs = ranks_[static_cast<std::size_t>(rank)];
  rs.l2_dirty = l2_dirty_after(rs.l2_dirty, hw_.memory, touched, written);
}

void Machine::charge_l2(int rank, const L2Reference& ref, double touched, double written, KernelRequest& req) {
  if (!follows_l2()) return;
  RankState& rs = ranks_[static_cast<std::size_t>(rank)];
  const double extra = l2_extra_bytes(rs.l2_dirty, ref, hw_.memory, touched, written);
  rs.l2_dirty = l2_dirty_after(rs.l2_dirty, hw_.memory, touched, written);
  if (extra == 0 || req.blocks < 1 || !req.block_work) return;
  req.block_work = with_extra_bytes(std::move(req.block_work), extra / static_cast<double>(req.blocks));
}

void Machine::launch_kernel(OpId id) {
  const Op& op = dag_.op(id);
  tl_.ops[id].launched = sim_.now();
  KernelRequest req;
  req.on_first_block = [this, id] { tl_.ops[id].start = sim_.now(); };
  req.on_complete = [this, id] { finish(id); };
  std::visit(
      [&](const auto& payload) {
        using T = std::decay_t<decltype(payload)>;
        if constexpr (std::is_same_v<T, GemmOp>) gemm_kernel(id, payload, req);
        else if constexpr (std::is_same_v<T, ElementwiseOp>) elementwise_kernel(id, payload, req);
        else if constexpr (std::is_same_v<T, ReduceOp>) reduction_kernel(id, payload, req);
        else if constexpr (std::is_same_v<T, CollectiveOp>) collective_kernel(id, payload, req);
        else if constexpr (std::is_same_v<T, BarrierOp>) barrier_kernel(id, payload, req);
        else if constexpr (std::is_same_v<T, SendRecvOp>) sendrecv_kernel(id, payload, req);
        else if constexpr (std::is_same_v<T, FusedRingGemmOp>) fused_kernel(id, payload, req);
        else if constexpr (std::is_same_v<T, AttentionOp>) attention_kernel(id, payload, req);
        else throw std::logic_error("not a kernel: " + op.name);
      },
      op.payload);
  kernel_of_[id] = ranks_[static_cast<std::size_t>(op.rank)].sms->launch(std::move(req));
}

void Machine::gemm_kernel(OpId id, const GemmOp& g, KernelRequest& req) {
  const GemmPlan& plan = gemm_plans_.plan(g.problem);
  if (tl_.detailed)
    tl_.details[id] = fmt::format("tile {}x{}x{}, split-k {}{}, {} blocks{}", plan.tile.m, plan.tile.n, plan.tile.k, plan.split_k,
                                  plan.library_split ? " (the library's split rule)" : "", plan.blocks,
                                  plan.cluster.ctas() > 1 ? fmt::format(" in clusters of {}x{}", plan.cluster.m, plan.cluster.n) : "");
  req.block = hw_.gemm.block;
  req.blocks = plan.blocks;
  req.max_resident_blocks = plan.resident_blocks;
  req.draws_memory = true;
  req.block_work = ramp_on_first_blocks(gemm_block_work(plan, hw_), hw_.gemm.kernel_ramp);
  // What it writes: C, or split-K's fp32 partials (the reduction kernel after it is not followed).
  const double c_bytes = static_cast<double>(g.problem.batch) * static_cast<double>(g.problem.m) *
                         static_cast<double>(g.problem.n) * dtype_bytes(g.problem.dtype);
  charge_l2(dag_.op(id).rank, {.fitted_after_dirty_l2 = false}, plan.hbm_bytes, plan.split_k > 1 ? plan.reduction_read_bytes : c_bytes, req);
  if (plan.split_k == 1) return;
  const ElementwisePlan reduction = plan_elementwise(plan.reduction_read_bytes + plan.reduction_written_bytes, hw_);
  if (tl_.detailed) tl_.details[id] += fmt::format(", then a reduction of the partials in {} blocks", reduction.blocks);
  // The reduction kernel is queued behind the GEMM on its stream: it starts when the GEMM's
  // last block ends, and the op ends with it.
  req.on_complete = [this, id, reduction] {
    KernelRequest sum;
    streaming_kernel(reduction, LoopWork{}, sum);
    sum.on_complete = [this, id] { finish(id); };
    ranks_[static_cast<std::size_t>(dag_.op(id).rank)].sms->launch(std::move(sum));
  };
}

void Machine::elementwise_kernel(OpId id, const ElementwiseOp& e, KernelRequest& req) {
  const ElementwisePlan plan = plan_elementwise(e.bytes_read + e.bytes_written, hw_);
  if (tl_.detailed) tl_.details[id] = fmt::format("{} blocks", plan.blocks);
  streaming_kernel(plan, LoopWork{e.loop, e.elements, e.operands, e.elements > 0 ? e.bytes_written / e.elements : 0, e.dims, e.row}, req);
  charge_l2(dag_.op(id).rank, {.fitted_after_dirty_l2 = true}, e.bytes_read + e.bytes_written, e.bytes_written, req);
}

void Machine::streaming_kernel(const ElementwisePlan& plan, const LoopWork& loop, KernelRequest& req) const {
  req.block = hw_.elementwise.block;
  req.blocks = plan.blocks;
  req.draws_memory = true;
  req.block_work = start_up_on_every_placement(elementwise_block_work(plan, hw_, loop), hw_.elementwise.block_overhead);
}

void Machine::reduction_kernel(OpId id, const ReduceOp& r, KernelRequest& req) {
  const ElementwisePlan plan = plan_reduction(r.inputs, r.out_bytes, hw_);
  if (tl_.detailed) tl_.details[id] = fmt::format("{} of {} partials, {} blocks", reduction_kernel_name(r.kernel), r.inputs, plan.blocks);
  req.block = hw_.elementwise.block;
  req.blocks = plan.blocks;
  req.draws_memory = true;
  req.block_work = start_up_on_every_placement(reduction_block_work(plan, r.kernel, r.inputs, hw_),
                                               hw_.reduction.block_overhead[static_cast<int>(r.kernel)]);
  charge_l2(dag_.op(id).rank, {.fitted_after_dirty_l2 = true}, (r.inputs + 1) * r.out_bytes, r.out_bytes, req);
}

void Machine::attention_kernel(OpId id, const AttentionOp& a, KernelRequest& req) {
  const AttentionPlan plan = plan_attention(a, hw_);
  if (tl_.detailed) tl_.details[id] = fmt::format("{} query tiles x heads", plan.blocks);
  req.block = hw_.gemm.block;  // FA3 is a warp-specialized Hopper kernel like the GEMMs
  req.blocks = plan.blocks;
  req.draws_memory = true;
  if (plan.tiles_per_sequence > 0)  // causal FlashAttention-2: tiles of different work, in grid order
    req.block_work_at = [plan, &hw = hw_](std::int64_t block) { return attention_block_work_at(plan, block, hw); };
  else
    req.block_work = [work = attention_block_work(plan, hw_)] { return work; };
}

BlockResources Machine::nccl_block(int threads) const {
  return BlockResources{threads, threads * hw_.nccl.registers_per_thread, hw_.nccl.shared_bytes, 1};
}

void Machine::collective_kernel(OpId id, const CollectiveOp& c, KernelRequest& req) {
  const int ranks = dag_.process_group_of(c.group).size();
  if (ranks == 1) {
    // NCCL with one rank copies the buffer out of place and launches nothing else
    // (ncclLaunchOneRank, src/device/onerank.cu: a device-to-device memcpy).
    elementwise_kernel(id, ElementwiseOp{c.buffer_bytes, c.buffer_bytes}, req);
    return;
  }
  pass_l2(dag_.op(id).rank, c.buffer_bytes, c.buffer_bytes);
  const GroupFabric& gf = fabric_of(c.group);
  const CollectivePlan plan =
      plan_collective(c.kind, c.buffer_bytes, ranks, gf.one_node, hw_, gf.ring_capacity, gf.spread,
                      gf.nic_capacity);
  if (tl_.detailed)
    tl_.details[id] = fmt::format("{} {}, {} channels", nccl_algorithm_name(plan.algorithm), plan.protocol->name, plan.channels);
  req.block = nccl_block(plan.threads);
  // A kernel whose blocks must all be resident at once can use no more than fit.
  req.blocks = std::min<std::int64_t>(plan.channels, hw_.sm.count);
  req.held = true;
  req.on_resident = [this, group = c.group, plan] {
    rendezvous_.arrive(group, [this, plan](const std::vector<OpId>& members) { run_collective(members, plan); });
  };
}

void Machine::barrier_kernel(OpId /*id*/, const BarrierOp& b, KernelRequest& req) {
  req.block = hw_.barrier.block;
  req.blocks = 1;
  req.held = true;
  // The latency is a round of remote signals; a group of one GPU signals only itself
  // (torch 2.11's barrier kernel over one rank runs 0.9 us, about a launch gap).
  const Tick latency = dag_.process_group_of(b.group).size() > 1 ? hw_.barrier.latency : Tick{0};
  req.on_resident = [this, group = b.group, latency] {
    rendezvous_.arrive(group, [this, latency](const std::vector<OpId>& members) {
      sim_.schedule_after(latency, [this, members] { release_all(members); });
    });
  };
}

// The op's rounds as NCCL numbers them (each send's peer, so many ranks ahead in the
// group; the receives mirror the sends in every pattern built here), on the group's nodes.
P2pPlan Machine::p2p_plan_of(OpId id, const SendRecvOp& s) const {
  const ProcessGroup& pg = dag_.process_group_of(s.group);
  const int n = pg.size();
  const int me = pg.index_of(dag_.op(id).rank);
  std::vector<P2pRound> rounds;
  for (const Transfer& t : s.sends) rounds.push_back({((pg.index_of(t.peer) - me) % n + n) % n, t.bytes});
  if (s.self_bytes > 0) rounds.push_back({0, s.self_bytes});
  return plan_p2p(rounds, {n, fabric_of(s.group).spread.most, me}, hw_.nccl);
}

void Machine::sendrecv_kernel(OpId id, const SendRecvOp& s, KernelRequest& req) {
  if (follows_l2()) {
    double moved = s.self_bytes;
    for (const Transfer& t : s.sends) moved += t.bytes;
    pass_l2(dag_.op(id).rank, moved, moved);
  }
  const P2pPlan plan = p2p_plan_of(id, s);
  const NcclProtocol& proto = *plan.protocol;
  if (sendrecv_processing_.empty()) sendrecv_processing_.assign(dag_.size(), 0);
  sendrecv_processing_[id] = p2p_processing_time(plan, hw_.nccl);
  if (tl_.detailed) tl_.details[id] = fmt::format("send/recv {}, {} channels", proto.name, plan.blocks);
  req.block = nccl_block(hw_.nccl.p2p.threads);
  req.blocks = std::min(plan.blocks, hw_.sm.count);
  req.held = true;
  req.on_resident = [this, group = s.group, &proto] {
    rendezvous_.arrive(group, [this, &proto](const std::vector<OpId>& members) { run_sendrecv(members, proto); });
  };
}

void Machine::fused_kernel(OpId id, const FusedRingGemmOp& f, KernelRequest& req) {
  GemmProblem step = f.step;
  step.by_library = false;  // a custom kernel tiles itself: the library's split rule is not its
  const GemmPlan plan = gemm_plans_.plan(step);
  const int grid = static_cast<int>(std::min<std::int64_t>(hw_.sm.count, plan.blocks));
  if (tl_.detailed) tl_.details[id] = fmt::format("persistent grid {}, tile {}x{}x{}, {} steps", grid, plan.tile.m, plan.tile.n,
                                   plan.tile.k, f.steps);
  req.block = hw_.gemm.block;
  req.blocks = grid;
  req.draws_memory = true;
  req.held = true;
  req.on_resident = [this, group = f.group, plan, grid] {
    rendezvous_.arrive(group, [this, plan, grid](const std::vector<OpId>& members) {
      run_fused_round(members, plan, grid, 0);
    });
  };
}

// NCCL's ring visits the group's ranks in order; its narrowest hop sets the pace (a
// hop between nodes has every rail's NIC).
double Machine::ring_link_capacity(const ProcessGroup& pg) const {
  const Topology& topo = fabric_.topology();
  double c = std::numeric_limits<double>::infinity();
  for (int i = 0; i < pg.size() && pg.size() > 1; ++i) {
    const int r = pg.rank(i), next = pg.rank(i + 1);
    const double rails = topo.node_of(r) == topo.node_of(next) ? 1.0 : topo.gpus_per_node();
    c = std::min(c, rails * topo.route_capacity(r, next));
  }
  return c;
}

NodeSpread Machine::node_spread(const ProcessGroup& pg) const {
  const Topology& topo = fabric_.topology();
  std::map<int, int> per_node;
  for (int r : pg.ranks) ++per_node[topo.node_of(r)];
  if (per_node.empty()) return {};
  NodeSpread s{per_node.begin()->second, static_cast<int>(per_node.size()), 0};
  for (const auto& [node, n] : per_node) {
    s.most = std::max(s.most, n);
    if (n != s.per_node) s.per_node = 0;  // uneven: NCCL's NVLS tree is not modelled for it
  }
  return s;
}

// The route from the group's first member to the same GPU of the next node it spans
// (NCCL's NVLS tree crosses nodes rail by rail); 0 inside one node.
double Machine::nic_capacity(const ProcessGroup& pg) const {
  const Topology& topo = fabric_.topology();
  for (int r : pg.ranks)
    if (topo.node_of(r) != topo.node_of(pg.rank(0))) {
      const int per = topo.gpus_per_node();
      return topo.route_capacity(pg.rank(0), topo.node_of(r) * per + pg.rank(0) % per);
    }
  return 0;
}

bool Machine::in_one_node(const ProcessGroup& pg) const {
  const Topology& topo = fabric_.topology();
  for (int i = 1; i < pg.size(); ++i)
    if (topo.node_of(pg.rank(i)) != topo.node_of(pg.rank(0))) return false;
  return true;
}

}  // namespace tpsim::runtime_detail
