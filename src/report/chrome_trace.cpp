#include "tpsim/report/chrome_trace.hpp"

#include <cmath>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"
#include "tpsim/io/json_numbers.hpp"

namespace tpsim {

namespace {

constexpr int kCopyEngineTid = 100;

// Hands each event to `emit` as it is made: streamed to a file, or kept (tests).
struct TraceBuilder {
  const std::function<void(const Json&)>& emit;
  const TraceOptions& options;
  int next_flow = 1;

  void event(const Json& e) { emit(e); }
  void meta(int pid, int tid, const std::string& what, const std::string& name) {
    Json e{{"ph", "M"}, {"pid", pid}, {"name", what}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    event(e);
  }
  void flow(int pid_a, int tid_a, Tick t_a, int pid_b, int tid_b, Tick t_b, const std::string& name) {
    if (options.detail == TraceDetail::ops) return;
    const int id = next_flow++;
    event({{"ph", "s"}, {"id", id}, {"pid", pid_a}, {"tid", tid_a}, {"ts", trace_us(t_a)}, {"name", name}, {"cat", "dependency"}});
    event({{"ph", "f"}, {"bp", "e"}, {"id", id}, {"pid", pid_b}, {"tid", tid_b}, {"ts", trace_us(t_b)}, {"name", name}, {"cat", "dependency"}});
  }
};

int tid_of(const Op& op, const OpTiming& t) {
  return std::holds_alternative<CopyOp>(op.payload) ? kCopyEngineTid + std::max(0, t.engine) : op.stream + 1;
}

Json op_args(const Op& op, const OpTiming& t, const std::string& detail) {
  Json a{{"kind", std::string(op_kind_name(op))}, {"issued_us", trace_us(t.issued)}, {"ready_us", trace_us(t.ready)}};
  if (const auto* g = std::get_if<GemmOp>(&op.payload))
    a["shape"] = fmt::format("{}[{},{}]x[{},{}] {}", g->problem.batch > 1 ? fmt::format("{} x ", g->problem.batch) : "", g->problem.m,
                             g->problem.k, g->problem.k, g->problem.n, dtype_name(g->problem.dtype));
  if (const auto* c = std::get_if<CopyOp>(&op.payload)) a["route"] = fmt::format("GPU {} -> GPU {}", c->src_rank, c->dst_rank);
  if (op_flops(op) > 0) a["flops"] = op_flops(op);
  if (op_bytes(op) > 0) a["bytes"] = op_bytes(op);
  if (!detail.empty()) a["detail"] = detail;
  return a;
}

// Nearest op on the same stream that is not a record/wait, walking `forward` or back.
long visible_neighbor(const Dag& dag, OpId id, bool forward) {
  const auto& g = dag.graph();
  OpId cur = id;
  while (true) {
    long next = -1;
    if (forward) {
      for (auto [e, end] = boost::out_edges(cur, g); e != end; ++e)
        if (dag.op(boost::target(*e, g)).stream == dag.op(cur).stream && dag.op(boost::target(*e, g)).rank == dag.op(cur).rank)
          next = static_cast<long>(boost::target(*e, g));
    } else {
      for (auto [e, end] = boost::in_edges(cur, g); e != end; ++e)
        if (dag.op(boost::source(*e, g)).stream == dag.op(cur).stream && dag.op(boost::source(*e, g)).rank == dag.op(cur).rank)
          next = static_cast<long>(boost::source(*e, g));
    }
    if (next < 0) return -1;
    cur = static_cast<OpId>(next);
    if (op_class(dag.op(cur)) != OpClass::event) return next;
  }
}

void build_trace(const RunResult& r, const TraceOptions& options, const std::function<void(const Json&)>& emit) {
  TraceBuilder tb{emit, options};
  for (std::size_t vi = 0; vi < r.runs.size(); ++vi) {
    const VariantRun& run = r.runs[vi];
    const Dag& dag = run.dag;
    const Timeline& tl = run.timeline;
    const auto pid = [&](int rank) { return static_cast<int>(vi) * 1000 + rank + 1; };
    for (int rank = 0; rank < dag.ranks(); ++rank) {
      if (!options.shows(rank)) continue;
      tb.meta(pid(rank), -1, "process_name", fmt::format("{} / GPU {}", run.variant, rank));
      tb.event({{"ph", "M"}, {"pid", pid(rank)}, {"name", "process_sort_index"}, {"args", {{"sort_index", pid(rank)}}}});
      for (int s = 0; s < dag.streams(rank); ++s) tb.meta(pid(rank), s + 1, "thread_name", fmt::format("stream {}", s));
      for (int e = 0; e < r.scenario.hardware.copy_engines.p2p_engines; ++e)
        tb.meta(pid(rank), kCopyEngineTid + e, "thread_name", fmt::format("copy engine {}", e));
      if (options.detail == TraceDetail::ops) continue;
      for (const Sample& smp : tl.busy_sms[static_cast<std::size_t>(rank)])
        tb.event({{"ph", "C"}, {"pid", pid(rank)}, {"name", "busy SMs"}, {"ts", trace_us(smp.time)}, {"args", {{"SMs", smp.value}}}});
      for (const Sample& smp : tl.egress_rate[static_cast<std::size_t>(rank)])
        tb.event({{"ph", "C"}, {"pid", pid(rank)}, {"name", "NVLink egress GB/s"}, {"ts", trace_us(smp.time)},
                             {"args", {{"GB/s", std::round(smp.value * 1e4) / 10.0}}}});
    }
    std::vector<std::vector<OpId>> groups(static_cast<std::size_t>(dag.groups()));
    for (OpId id = 0; id < dag.size(); ++id) {
      const Op& op = dag.op(id);
      const OpTiming& t = tl.ops[id];
      if (const auto* w = std::get_if<WaitOp>(&op.payload)) {
        const long from = visible_neighbor(dag, dag.record_of(w->event), false);
        const long to = visible_neighbor(dag, id, true);
        if (from >= 0 && to >= 0 && options.shows(op.rank)) {
          const Op& a = dag.op(static_cast<OpId>(from));
          const Op& b = dag.op(static_cast<OpId>(to));
          tb.flow(pid(a.rank), tid_of(a, tl.ops[static_cast<OpId>(from)]), tl.ops[static_cast<OpId>(from)].start,
                  pid(b.rank), tid_of(b, tl.ops[static_cast<OpId>(to)]), tl.ops[static_cast<OpId>(to)].start, "stream wait");
        }
      }
      if (op_class(op) == OpClass::event || !options.shows(op.rank)) continue;
      if (const int g = rendezvous_group(op); g >= 0) groups[static_cast<std::size_t>(g)].push_back(id);
      tb.event({{"ph", "X"}, {"pid", pid(op.rank)}, {"tid", tid_of(op, t)}, {"name", op.name},
                           {"cat", std::string(op_kind_name(op))}, {"ts", trace_us(t.start)}, {"dur", trace_us(t.end) - trace_us(t.start)},
                           {"args", op_args(op, t, tl.detail(id))}});
    }
    // Cross-rank: the last rank to arrive releases everyone else.
    for (const auto& members : groups) {
      if (members.size() < 2) continue;
      OpId last = members.front();
      for (OpId m : members)
        if (tl.ops[m].start > tl.ops[last].start) last = m;
      for (OpId m : members) {
        if (m == last || !options.shows(dag.op(m).rank) || !options.shows(dag.op(last).rank)) continue;
        const Op& a = dag.op(last);
        const Op& b = dag.op(m);
        tb.flow(pid(a.rank), tid_of(a, tl.ops[last]), tl.ops[last].start, pid(b.rank), tid_of(b, tl.ops[m]),
                std::max(tl.ops[m].start, tl.ops[m].end - kPicosPerNs), "rendezvous");
      }
    }
  }
}

Json trace_other_data(const RunResult& r) {
  return {{"scenario", r.scenario.name}, {"hardware", r.scenario.hardware.name}, {"generator", "tpsim"}};
}

}  // namespace

std::int64_t trace_event_estimate(const RunResult& r, const TraceOptions& options) {
  std::int64_t events = 0;
  for (const VariantRun& run : r.runs) {
    for (int rank = 0; rank < run.dag.ranks(); ++rank) {
      if (!options.shows(rank)) continue;
      events += 8;
      if (options.detail == TraceDetail::full)
        events += static_cast<std::int64_t>(run.timeline.busy_sms[static_cast<std::size_t>(rank)].size() +
                                            run.timeline.egress_rate[static_cast<std::size_t>(rank)].size());
    }
    for (OpId id = 0; id < run.dag.size(); ++id)
      if (options.shows(run.dag.op(id).rank)) events += options.detail == TraceDetail::full ? 3 : 1;  // the op and its flows
  }
  return events;
}

Json chrome_trace(const RunResult& r, const TraceOptions& options) {
  Json events = Json::array();
  build_trace(r, options, [&](const Json& e) { events.push_back(e); });
  return Json{{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", trace_other_data(r)}};
}

void write_chrome_trace(const RunResult& r, const TraceOptions& options, OutputStream& out) {
  // The keys in the order a Json object dumps them, so the stream equals chrome_trace(r).dump().
  out.write(R"({"displayTimeUnit":"ns","otherData":)" + trace_other_data(r).dump() + R"(,"traceEvents":[)");
  bool first = true;
  build_trace(r, options, [&](const Json& e) {
    if (!first) out.write(",");  // (not "," + dump: GCC 12 warns falsely of an overflow there)
    out.write(e.dump());
    first = false;
  });
  out.write("]}\n");
}

void write_trace_file(const std::string& path, const RunResult& r, const TraceOptions& options, std::int64_t max_events) {
  const std::int64_t events = trace_event_estimate(r, options);
  if (events > max_events)
    throw InputError(fmt::format("--trace: the trace would have about {} events (several GB), more than {}: trace fewer ranks "
                                 "(--trace-ranks 0,1) or the ops alone (--trace-detail ops)",
                                 events, max_events));
  OutputStream out(path);
  write_chrome_trace(r, options, out);
  out.commit();
}

std::set<int> parse_trace_ranks(const std::string& list, int gpus) {
  std::set<int> ranks;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v >= gpus)
      throw InputError(fmt::format("--trace-ranks: \"{}\" is not a rank of this {}-GPU scenario (0 to {})", item, gpus, gpus - 1));
    ranks.insert(static_cast<int>(v));
    start = comma + 1;
  }
  return ranks;
}

}  // namespace tpsim
