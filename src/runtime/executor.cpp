#include "tpsim/runtime/executor.hpp"

#include <cmath>

#include <fmt/format.h>

#include "tpsim/core/invariant.hpp"

#include "machine.hpp"

namespace tpsim {
namespace runtime_detail {

namespace {

void add_sample(std::vector<Sample>& samples, Tick t, double v) {
  if (!samples.empty() && samples.back().time == t) samples.back().value = v;
  else samples.push_back({t, v});
}

}  // namespace

Machine::Machine(const Dag& dag, const HardwareSpec& hw, bool detailed)
    : dag_(dag), hw_(hw), gemm_plans_(hw), fabric_(sim_, Topology(hw.fabric, dag.ranks(), hw.memory.hbm_bytes_per_ps)), rendezvous_(dag),
      kernel_of_(dag.size(), -1), waiters_(dag.size()) {
  tl_.ops.resize(dag.size());
  if (detailed) tl_.details.resize(dag.size());
  device_latency_ = dag.host_issue() == HostIssue::cuda_graph ? hw.launch.graph_device_latency : hw.launch.device_latency;
  cross_stream_latency_ = dag.host_issue() == HostIssue::cuda_graph ? 0 : hw.launch.cross_stream_latency;
  tl_.detailed = detailed;
  for (int pg = 0; pg < dag.process_groups(); ++pg)
    group_fabric_.push_back({ring_link_capacity(dag.process_group(pg)), in_one_node(dag.process_group(pg)),
                             node_spread(dag.process_group(pg)), nic_capacity(dag.process_group(pg))});
  tl_.busy_sm_time.assign(static_cast<std::size_t>(dag.ranks()), 0.0);
  tl_.busy_sms.resize(static_cast<std::size_t>(dag.ranks()));
  tl_.egress_rate.resize(static_cast<std::size_t>(dag.ranks()));
  fabric_.set_rate_observer([this](Tick t, int g, double out, double in) {
    if (tl_.detailed) add_sample(tl_.egress_rate[static_cast<std::size_t>(g)], t, out);
    RankState& rs = ranks_[static_cast<std::size_t>(g)];
    rs.nvlink_bytes_per_ps = out + in;
    rs.sms->set_hbm_capacity(hbm_left(g));
  });
  for (int r = 0; r < dag.ranks(); ++r) {
    RankState rs;
    rs.sms = std::make_unique<BlockScheduler>(sim_, hw.sm, hw.memory.hbm_bytes_per_ps);
    rs.sms->set_busy_observer([this, r](Tick t, int busy) { on_busy_change(r, t, busy); });
    rs.copies = std::make_unique<CopyEngines>(sim_, fabric_, hw.copy_engines);
    rs.streams.resize(static_cast<std::size_t>(dag.streams(r)));
    rs.l2_dirty = l2_dirty_at_start(hw.memory.l2_start, hw.memory);
    for (OpId id : dag.program(r)) rs.streams[static_cast<std::size_t>(dag.op(id).stream)].ops.push_back(id);
    ranks_.push_back(std::move(rs));
    tl_.sm_count.push_back(hw.sm.count);
    tl_.egress_capacity.push_back(dag.ranks() > 1 ? fabric_.topology().egress_capacity(r) : 0.0);
  }
}

Timeline Machine::run() {
  issue_programs();
  for (int r = 0; r < dag_.ranks(); ++r)
    for (int s = 0; s < dag_.streams(r); ++s) advance(r, s);
  sim_.run();
  check_finished();
  check_invariants();
  tl_.events = sim_.events_fired();
  for (int r = 0; r < dag_.ranks(); ++r) {
    tl_.egress_bytes.push_back(fabric_.egress_bytes(r));
    tl_.egress_bytes_across_nodes.push_back(fabric_.egress_bytes_across_nodes(r));
    tl_.blocks += ranks_[static_cast<std::size_t>(r)].sms->blocks_dispatched();
  }
  return std::move(tl_);
}

StreamState& Machine::stream_of(OpId id) {
  const Op& op = dag_.op(id);
  return ranks_[static_cast<std::size_t>(op.rank)].streams[static_cast<std::size_t>(op.stream)];
}

// The host thread enqueues in program order and never blocks (no host syncs in these DAGs).
void Machine::issue_programs() {
  const HostIssue how = dag_.host_issue();
  for (int r = 0; r < dag_.ranks(); ++r) {
    // A replayed graph costs one launch; its ops then reach the GPU without the host.
    Tick host = how == HostIssue::cuda_graph ? hw_.launch.host_overhead : 0;
    for (OpId id : dag_.program(r)) {
      host += host_cost(dag_.op(id), how);
      tl_.ops[id].issued = host;
    }
  }
}

Tick Machine::host_cost(const Op& op, HostIssue how) const {
  if (how == HostIssue::cuda_graph || how == HostIssue::enqueued) return 0;
  const bool launches = runs_on_sms(op) || std::holds_alternative<CopyOp>(op.payload);
  if (how == HostIssue::compiled) return launches ? hw_.launch.host_overhead : 0;
  // Eager: every op goes through Python and the dispatcher; an event record or
  // wait (a stream join) is one CUDA call.
  if (std::holds_alternative<GemmOp>(op.payload)) return hw_.launch.eager_gemm_overhead;
  return launches ? hw_.launch.eager_op_overhead : hw_.launch.host_overhead;
}

void Machine::advance(int rank, int stream) {
  StreamState& s = ranks_[static_cast<std::size_t>(rank)].streams[static_cast<std::size_t>(stream)];
  while (!s.busy && s.head < s.ops.size()) {
    const OpId id = s.ops[s.head];
    OpTiming& t = tl_.ops[id];
    const Tick ready = std::max(t.issued, s.prev_end);
    if (sim_.now() < ready) {
      if (!sim_.pending(s.wake)) s.wake = sim_.schedule_at(ready, [this, rank, stream] { advance(rank, stream); });
      return;
    }
    if (t.ready < 0) t.ready = ready;
    const Op& op = dag_.op(id);
    if (std::holds_alternative<RecordOp>(op.payload)) {
      complete_now(id);
      for (auto [r, st] : std::exchange(waiters_[id], {})) advance(r, st);
      continue;
    }
    if (const auto* w = std::get_if<WaitOp>(&op.payload)) {
      const OpId rec = dag_.record_of(w->event);
      if (!tl_.ops[rec].finished()) {
        waiters_[rec].emplace_back(rank, stream);
        return;
      }
      complete_now(id);
      s.joined = true;
      continue;
    }
    s.busy = true;
    if (const auto* c = std::get_if<CopyOp>(&op.payload)) start_copy(id, *c);
    else sim_.schedule_after(device_latency_ + (s.joined ? cross_stream_latency_ : 0), [this, id] { launch_kernel(id); });
    s.joined = false;
    return;
  }
}

void Machine::complete_now(OpId id) {
  OpTiming& t = tl_.ops[id];
  t.start = t.end = sim_.now();
  StreamState& s = stream_of(id);
  ++s.head;
  s.prev_end = sim_.now();
}

void Machine::finish(OpId id) {
  tl_.ops[id].end = sim_.now();
  StreamState& s = stream_of(id);
  s.busy = false;
  ++s.head;
  s.prev_end = sim_.now();
  advance(dag_.op(id).rank, dag_.op(id).stream);
}

void Machine::start_copy(OpId id, const CopyOp& c) {
  tl_.ops[id].launched = sim_.now();
  CopyRequest req;
  req.src = c.src_rank;
  req.dst = c.dst_rank;
  req.bytes = c.bytes;
  req.on_start = [this, id](int engine) {
    tl_.ops[id].start = sim_.now();
    tl_.ops[id].engine = engine;
  };
  req.on_done = [this, id] { finish(id); };
  pass_l2(dag_.op(id).rank, c.bytes, c.bytes);
  ranks_[static_cast<std::size_t>(dag_.op(id).rank)].copies->submit(std::move(req));
}

void Machine::on_busy_change(int rank, Tick t, int busy) {
  RankState& rs = ranks_[static_cast<std::size_t>(rank)];
  if (busy == rs.busy) return;
  tl_.busy_sm_time[static_cast<std::size_t>(rank)] += static_cast<double>(rs.busy) * static_cast<double>(t - rs.busy_since);
  rs.busy = busy;
  rs.busy_since = t;
  if (tl_.detailed) add_sample(tl_.busy_sms[static_cast<std::size_t>(rank)], t, busy);
}

// HBM bandwidth left to the SMs: copy engines and peers reading or writing this GPU's
// memory over NVLink draw on the same HBM. Link traffic is capped by HBM on the fabric
// (Topology), so this never goes below zero.
double Machine::hbm_left(int rank) const {
  return std::max(0.0, hw_.memory.hbm_bytes_per_ps - ranks_[static_cast<std::size_t>(rank)].nvlink_bytes_per_ps);
}

// After a run: bytes conserved, and no op before its dependencies.
void Machine::check_invariants() const {
  const double sent = fabric_.bytes_started(), delivered = fabric_.bytes_delivered();
  double egress = 0;
  for (int r = 0; r < dag_.ranks(); ++r) egress += fabric_.egress_bytes(r);
  // Sums of many flows in different orders: equal up to rounding.
  if (std::abs(delivered - sent) > 1e-9 * std::max(1.0, sent) || std::abs(egress - sent) > 1e-6 * std::max(1.0, sent))
    throw InvariantViolation(fmt::format("bytes not conserved: {} sent, {} delivered, {} through the ports", sent, delivered, egress));
  const auto& g = dag_.graph();
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const OpId u = boost::source(*e, g), v = boost::target(*e, g);
    const OpTiming &tu = tl_.ops[u], &tv = tl_.ops[v];
    if (tv.start < tu.end || tv.start < tv.ready || tv.end < tv.start)
      throw InvariantViolation(fmt::format("'{}' (rank {}) ran at {} ps before its dependency '{}' ended at {} ps",
                                           dag_.op(v).name, dag_.op(v).rank, tv.start, dag_.op(u).name, tu.end));
  }
}

void Machine::check_finished() const {
  std::vector<std::string> stuck;
  for (int r = 0; r < dag_.ranks(); ++r)
    for (int s = 0; s < dag_.streams(r); ++s) {
      const StreamState& st = ranks_[static_cast<std::size_t>(r)].streams[static_cast<std::size_t>(s)];
      if (st.head < st.ops.size())
        stuck.push_back(fmt::format("rank {} stream {} at '{}'", r, s, dag_.op(st.ops[st.head]).name));
    }
  if (!stuck.empty())
    throw StuckError(fmt::format("the op graph cannot finish; stuck: {}", fmt::join(stuck, "; ")));
}

}  // namespace runtime_detail

Timeline execute(const Dag& dag, const HardwareSpec& hw, bool detailed) {
  dag.validate();
  return runtime_detail::Machine(dag, hw, detailed).run();
}

}  // namespace tpsim
