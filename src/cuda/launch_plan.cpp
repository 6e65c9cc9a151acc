#include "tpsim/cuda/launch_plan.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/core/overloaded.hpp"

namespace tpsim {

std::string_view launch_kind_name(LaunchKind k) {
  switch (k) {
    case LaunchKind::gemm: return "cublasLtMatmul";
    case LaunchKind::elementwise: return "elementwise_kernel";
    case LaunchKind::reduction: return "reduce_partials_kernel";
    case LaunchKind::attention: return "attention_kernel";
    case LaunchKind::fused_gemm: return "fused_ring_gemm";
    case LaunchKind::memcpy_peer: return "cudaMemcpyPeerAsync";
    case LaunchKind::nccl_collective: return "nccl_collective";
    case LaunchKind::nccl_sendrecv: return "nccl_send_recv";
    case LaunchKind::barrier: return "peer_flag_barrier";
    case LaunchKind::event_record: return "cudaEventRecord";
    case LaunchKind::event_wait: return "cudaStreamWaitEvent";
  }
  return "?";
}

namespace {

// NCCL needs an ncclRecv on the receiver for every ncclSend: each rank's send/recv
// call receives what the other ranks' calls of the same group send it.
void match_receives(LaunchPlan& plan, const Dag& dag) {
  std::map<int, std::vector<std::pair<int, const SendRecvOp*>>> by_group;  // group -> (rank, op)
  for (const RankPlan& rp : plan.ranks)
    for (const Launch& l : rp.launches)
      if (l.kind == LaunchKind::nccl_sendrecv) by_group[l.group].emplace_back(rp.rank, &std::get<SendRecvOp>(dag.op(l.op).payload));
  for (RankPlan& rp : plan.ranks)
    for (Launch& l : rp.launches) {
      if (l.kind != LaunchKind::nccl_sendrecv) continue;
      for (const auto& [sender, op] : by_group[l.group])
        for (const Transfer& t : op->sends)
          if (t.peer == rp.rank) l.recvs.push_back(Transfer{sender, t.bytes});
    }
}

bool is_nccl(LaunchKind k) { return k == LaunchKind::nccl_collective || k == LaunchKind::nccl_sendrecv; }

// NCCL pairs a communicator's calls by their order on each member, and the flag
// barriers pair by count: every member of a process group must reach its NCCL calls,
// and its barriers, in one order (the first member's, compared with each other's).
void check_call_order(const LaunchPlan& plan) {
  for (std::size_t pg = 0; pg < plan.process_groups.size(); ++pg) {
    for (const bool nccl : {true, false}) {
      std::vector<int> first;
      int first_rank = -1;
      for (int r : plan.process_groups[pg].ranks) {
        std::vector<int> order;
        for (const Launch& l : plan.ranks[static_cast<std::size_t>(r)].launches)
          if (l.process_group == static_cast<int>(pg) && (nccl ? is_nccl(l.kind) : l.kind == LaunchKind::barrier)) order.push_back(l.group);
        if (first_rank < 0) {
          first = std::move(order), first_rank = r;
          continue;
        }
        const auto [a, b] = std::mismatch(first.begin(), first.end(), order.begin(), order.end());
        if (a != first.end() || b != order.end())
          throw std::logic_error(fmt::format(
              "process group {} ({} ranks): rank {} reaches its {} in another order than rank {} (call {}: group {} against {}): "
              "the GPUs would {}", pg, plan.process_groups[pg].size(), r, nccl ? "NCCL calls" : "barriers", first_rank,
              a - first.begin(), b == order.end() ? -1 : *b, a == first.end() ? -1 : *a,
              nccl ? "pair the wrong NCCL calls or hang" : "pair the wrong barriers"));
      }
    }
  }
}

}  // namespace

int communicator_rank(const LaunchPlan& plan, int pg, int global_rank) {
  const int at = plan.process_groups.at(static_cast<std::size_t>(pg)).index_of(global_rank);
  if (at < 0) throw std::logic_error(fmt::format("rank {} is not a member of process group {}", global_rank, pg));
  return at;
}

LaunchPlan plan_launches(const Dag& dag) {
  LaunchPlan plan;
  plan.groups = dag.groups();
  for (int pg = 0; pg < dag.process_groups(); ++pg) plan.process_groups.push_back(dag.process_group(pg));
  plan.uses_nccl.assign(plan.process_groups.size(), false);
  plan.uses_barrier.assign(plan.process_groups.size(), false);
  std::vector<std::vector<int>> group_ranks(static_cast<std::size_t>(dag.groups()));
  for (int r = 0; r < dag.ranks(); ++r) {
    RankPlan rp;
    rp.rank = r;
    rp.streams = dag.streams(r);
    std::map<int, int> slot_of_event;  // DAG event -> this rank's cudaEvent index
    for (OpId id : dag.program(r)) {
      const Op& op = dag.op(id);
      Launch l;
      l.op = id;
      l.stream = op.stream;
      l.group = rendezvous_group(op);
      if (l.group >= 0) {
        group_ranks[static_cast<std::size_t>(l.group)].push_back(r);
        l.process_group = dag.process_group_id_of(l.group);
      }
      std::visit(
          Overloaded{
              [&](const GemmOp& g) {
                l.kind = LaunchKind::gemm;
                l.args = fmt::format("m={} n={} k={} {}{}", g.problem.m, g.problem.n, g.problem.k, dtype_name(g.problem.dtype),
                                     g.problem.batch > 1 ? fmt::format(" batch={}", g.problem.batch) : "");
              },
              [&](const ElementwiseOp& e) {
                l.kind = LaunchKind::elementwise;
                l.args = fmt::format("read {:.0f} B, write {:.0f} B", e.bytes_read, e.bytes_written);
              },
              [&](const ReduceOp& red) {
                l.kind = LaunchKind::reduction;
                l.args = fmt::format("sum of {} x {:.0f} B", red.inputs, red.out_bytes);
              },
              [&](const AttentionOp& a) {
                l.kind = LaunchKind::attention;
                l.args = fmt::format("tokens={} seq={} heads={} kv_heads={} head_dim={}{}", a.tokens, a.seq_len, a.heads,
                                     a.kv_heads, a.head_dim, a.backward ? " backward" : "");
              },
              [&](const FusedRingGemmOp& f) {
                l.kind = LaunchKind::fused_gemm;
                l.args = fmt::format("m={} n={} k={} x {} steps, send {:.0f} B to {}", f.step.m, f.step.n, f.step.k, f.steps,
                                     f.send_bytes, f.send_to);
              },
              [&](const CopyOp& c) {
                l.kind = LaunchKind::memcpy_peer;
                l.args = fmt::format("{:.0f} B from GPU {} to GPU {}", c.bytes, c.src_rank, c.dst_rank);
              },
              [&](const CollectiveOp& c) {
                l.kind = LaunchKind::nccl_collective;
                const char* call = c.kind == CollectiveKind::all_gather       ? "ncclAllGather"
                                   : c.kind == CollectiveKind::reduce_scatter ? "ncclReduceScatter"
                                                                              : "ncclAllReduce";
                l.args = fmt::format("{} {:.0f} B", call, c.buffer_bytes);
              },
              [&](const SendRecvOp& s) {
                l.kind = LaunchKind::nccl_sendrecv;
                std::vector<std::string> parts;
                for (const auto& t : s.sends) parts.push_back(fmt::format("send {:.0f} B to {}", t.bytes, t.peer));
                if (s.self_bytes > 0) parts.push_back(fmt::format("copy {:.0f} B to itself", s.self_bytes));
                l.args = fmt::format("{}", fmt::join(parts, ", "));
              },
              [&](const BarrierOp&) { l.kind = LaunchKind::barrier; },
              [&](const RecordOp& rec) {
                l.kind = LaunchKind::event_record;
                l.event_slot = slot_of_event.emplace(rec.event, static_cast<int>(slot_of_event.size())).first->second;
              },
              [&](const WaitOp& w) {
                l.kind = LaunchKind::event_wait;
                const auto it = slot_of_event.find(w.event);
                if (it == slot_of_event.end())
                  throw std::logic_error(fmt::format("rank {} '{}': waits on an event not recorded earlier on this rank", r, op.name));
                l.event_slot = it->second;
              }},
          op.payload);
      rp.launches.push_back(std::move(l));
    }
    rp.events = static_cast<int>(slot_of_event.size());
    for (const Launch& l : rp.launches) {
      if (is_nccl(l.kind)) plan.uses_nccl[static_cast<std::size_t>(l.process_group)] = true;
      if (l.kind == LaunchKind::barrier) plan.uses_barrier[static_cast<std::size_t>(l.process_group)] = true;
    }
    plan.ranks.push_back(std::move(rp));
  }
  for (std::size_t g = 0; g < group_ranks.size(); ++g) {
    const int members = dag.process_group_of(static_cast<int>(g)).size();
    if (static_cast<int>(group_ranks[g].size()) != members)
      throw std::logic_error(fmt::format("group {} is called by {} of the {} ranks of its process group: NCCL would hang", g,
                                         group_ranks[g].size(), members));
  }
  check_call_order(plan);
  match_receives(plan, dag);
  return plan;
}

std::string format_launch_plan(const LaunchPlan& plan, const Dag& dag) {
  std::string out;
  for (std::size_t pg = 1; pg < plan.process_groups.size(); ++pg)
    if (plan.uses_nccl[pg] || plan.uses_barrier[pg])
      out += fmt::format("process group {}: ranks {}{}\n", pg, fmt::join(plan.process_groups[pg].ranks, " "),
                         plan.uses_nccl[pg] ? " (NCCL communicator split from the world's)" : "");
  for (const RankPlan& rp : plan.ranks) {
    out += fmt::format("rank {}: {} streams, {} events\n", rp.rank, rp.streams, rp.events);
    for (const Launch& l : rp.launches) {
      std::string extra = l.args;
      if (l.event_slot >= 0) extra = fmt::format("event {}", l.event_slot);
      if (l.group >= 0)
        extra = fmt::format("group {}{}{}{}", l.group, l.process_group > 0 ? fmt::format(" of process group {}", l.process_group) : "",
                            extra.empty() ? "" : ", ", extra);
      if (l.kind == LaunchKind::attention || l.kind == LaunchKind::fused_gemm) extra += " (not run by the backend: --stand-in)";
      out += fmt::format("  stream {}  {:<20} {:<36} {}\n", l.stream, launch_kind_name(l.kind), dag.op(l.op).name, extra);
    }
  }
  return out;
}

Json launch_plan_json(const LaunchPlan& plan, const Dag& dag) {
  Json ranks = Json::array();
  for (const RankPlan& rp : plan.ranks) {
    Json launches = Json::array();
    for (const Launch& l : rp.launches) {
      Json j{{"call", std::string(launch_kind_name(l.kind))}, {"stream", l.stream}, {"op", dag.op(l.op).name}};
      if (l.event_slot >= 0) j["event"] = l.event_slot;
      if (l.group >= 0) j["group"] = l.group, j["process_group"] = l.process_group;
      if (!l.args.empty()) j["args"] = l.args;
      launches.push_back(j);
    }
    ranks.push_back({{"rank", rp.rank}, {"streams", rp.streams}, {"events", rp.events}, {"launches", launches}});
  }
  Json groups = Json::array();
  for (const ProcessGroup& pg : plan.process_groups) groups.push_back(pg.ranks);
  return Json{{"groups", plan.groups}, {"process_groups", groups}, {"ranks", ranks}};
}

}  // namespace tpsim
