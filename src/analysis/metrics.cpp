#include "tpsim/analysis/metrics.hpp"

#include <algorithm>

#include "tpsim/runtime/rendezvous.hpp"

namespace tpsim {

namespace {

using Intervals = std::vector<std::pair<Tick, Tick>>;

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

// Walks back from the last op to finish, each time to the dependency that
// finished last (for a rendezvous: the rank that arrived last). Each op is
// charged the time between that dependency's end and its own end.
CriticalPath critical_path(const Dag& dag, const Timeline& tl) {
  CriticalPath cp;
  if (dag.size() == 0) return cp;
  std::vector<std::vector<OpId>> members(static_cast<std::size_t>(dag.groups()));
  for (OpId id = 0; id < dag.size(); ++id)
    if (int g = rendezvous_group(dag.op(id)); g >= 0) members[static_cast<std::size_t>(g)].push_back(id);
  OpId cur = 0;
  for (OpId id = 0; id < dag.size(); ++id)
    if (tl.ops[id].end > tl.ops[cur].end) cur = id;
  const auto& g = dag.graph();
  while (true) {
    cp.ops.push_back(cur);
    long best = -1;
    Tick best_end = -1;
    const auto consider = [&](OpId p) {
      if (tl.ops[p].end > best_end && tl.ops[p].end <= tl.ops[cur].end) best_end = tl.ops[p].end, best = static_cast<long>(p);
    };
    for (auto [e, end] = boost::in_edges(cur, g); e != end; ++e) consider(boost::source(*e, g));
    // A rendezvous op waits on the other ranks' arrivals: their stream predecessors.
    if (int grp = rendezvous_group(dag.op(cur)); grp >= 0)
      for (OpId m : members[static_cast<std::size_t>(grp)])
        for (auto [e, end] = boost::in_edges(m, g); e != end; ++e) consider(boost::source(*e, g));
    const OpTiming& t = tl.ops[cur];
    const Tick from = best >= 0 ? best_end : t.issued;
    const Tick begin = std::max(from, t.start >= 0 ? std::min(t.start, t.end) : from);
    cp.by_kind[std::string(op_kind_name(dag.op(cur)))] += t.end - begin;
    // Between its dependency and its start: the host still issuing it, launch latency until
    // it reached the GPU, then queueing for SMs or a copy engine that other work held.
    const Tick launched = t.launched >= 0 ? std::clamp(t.launched, from, begin) : begin;
    const Tick issued = std::clamp(t.issued, from, launched);
    if (issued > from) cp.by_kind["host"] += issued - from;
    if (launched > issued) cp.by_kind["launch"] += launched - issued;
    if (begin > launched) cp.by_kind["queued"] += begin - launched;
    if (best < 0) {
      cp.by_kind["host"] += std::min(tl.ops[cur].issued, from);  // host time before the first op
      break;
    }
    cur = static_cast<OpId>(best);
  }
  std::reverse(cp.ops.begin(), cp.ops.end());
  for (auto it = cp.by_kind.begin(); it != cp.by_kind.end();) it = it->second == 0 ? cp.by_kind.erase(it) : std::next(it);
  return cp;
}

}  // namespace

Tick union_length(Intervals v) {
  Tick total = 0;
  for (const auto& iv : merged(std::move(v))) total += iv.second - iv.first;
  return total;
}

Tick uncovered_length(Intervals a, Intervals b) {
  const Intervals ma = merged(std::move(a)), mb = merged(std::move(b));
  Tick covered = 0;
  std::size_t j = 0;
  for (const auto& x : ma) {
    while (j < mb.size() && mb[j].second <= x.first) ++j;
    for (std::size_t k = j; k < mb.size() && mb[k].first < x.second; ++k)
      covered += std::min(x.second, mb[k].second) - std::max(x.first, mb[k].first);
  }
  return union_length(ma) - covered;
}

VariantMetrics analyze(const Dag& dag, const Timeline& tl) {
  VariantMetrics m;
  m.first_start = kTickMax;
  std::vector<Intervals> comm(static_cast<std::size_t>(dag.ranks())), compute(comm.size());
  for (OpId id = 0; id < dag.size(); ++id) {
    const Op& op = dag.op(id);
    const OpTiming& t = tl.ops[id];
    const OpClass c = op_class(op);
    m.flops += op_flops(op);
    if (c == OpClass::event) continue;
    m.first_start = std::min(m.first_start, t.start);
    m.last_end = std::max(m.last_end, t.end);
    auto& bucket = c == OpClass::compute ? compute : comm;
    bucket[static_cast<std::size_t>(op.rank)].emplace_back(t.start, t.end);
  }
  if (m.first_start == kTickMax) m.first_start = 0;
  m.makespan = m.last_end - m.first_start;
  const double ranks = dag.ranks();
  double exposed = 0, sm = 0, link = 0;
  for (int r = 0; r < dag.ranks(); ++r) {
    const auto ri = static_cast<std::size_t>(r);
    exposed += static_cast<double>(uncovered_length(comm[ri], compute[ri]));
    if (m.makespan > 0) {
      sm += tl.busy_sm_time[ri] / (tl.sm_count[ri] * static_cast<double>(m.makespan));
      if (tl.egress_capacity[ri] > 0) link += tl.egress_bytes[ri] / (tl.egress_capacity[ri] * static_cast<double>(m.makespan));
    }
  }
  m.exposed_comm = static_cast<Tick>(exposed / ranks);
  if (tl.activity_recorded) {
    m.sm_utilization = sm / ranks;
    m.link_utilization = link / ranks;
  }
  m.critical_path = critical_path(dag, tl);
  return m;
}

}  // namespace tpsim
