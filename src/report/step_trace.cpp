#include "tpsim/report/step_trace.hpp"

#include <array>
#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "tpsim/io/json_numbers.hpp"

namespace tpsim {

namespace {

Json other_data(const StepResult& r) {
  const Scenario& s = r.scenario;
  return Json{{"scenario", s.name}, {"hardware", s.hardware.name}, {"gpus", s.gpus}, {"workload", s.workload_json},
              {"note", "one simulated rank per pipeline stage: every rank of a stage does the same at the same time"}};
}

// Bytes per second on each link tier of one rank, as a step function over the step.
void traffic_counters(const StepVariantRun& run, int stage, int pid, const std::function<void(const Json&)>& emit) {
  std::map<Tick, std::array<double, 2>> change;  // time -> rate delta per tier (bytes/ps)
  const auto& tasks = run.plan.program.tasks;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const StepTask& t = tasks[i];
    const TaskTime& tt = run.sim.times[i];
    if (t.stage != stage || tt.end <= tt.start) continue;
    // A layer pass's TP traffic, spread over the pass; a collective's on its tier.
    const PerTier sent = t.tier == LinkTier::nvlink ? PerTier{t.wire_bytes, 0} : PerTier{0, t.wire_bytes};
    const PerTier bytes = t.communication ? sent : t.link_bytes;
    for (LinkTier tier : {LinkTier::nvlink, LinkTier::nic}) {
      if (bytes.on(tier) <= 0) continue;
      const double rate = bytes.on(tier) / static_cast<double>(tt.end - tt.start);
      change[tt.start][static_cast<int>(tier)] += rate;
      change[tt.end][static_cast<int>(tier)] -= rate;
    }
  }
  std::array<double, 2> now{0, 0};
  for (const auto& [time, delta] : change) {
    for (int k = 0; k < 2; ++k) now[static_cast<std::size_t>(k)] = std::max(0.0, now[static_cast<std::size_t>(k)] + delta[static_cast<std::size_t>(k)]);
    emit({{"ph", "C"}, {"pid", pid}, {"name", "link traffic (GB/s)"}, {"ts", trace_us(time)},
          {"args", {{"NVLink", std::round(now[0] * 1e3 * 10) / 10}, {"NIC", std::round(now[1] * 1e3 * 10) / 10}}}});
  }
}

// Tracks for the communication inside layer passes: TP regions, CP exchanges, EP all-to-alls.
const std::vector<std::pair<std::string, int>> inner_tracks = {{"tp", 20}, {"cp", 21}, {"ep", 22}};

// A layer pass's own communication, where its simulation put it, stretched with the pass when
// the step slowed it (collectives holding SMs).
void layer_phases(const StepVariantRun& run, const StepTask& t, const TaskTime& tt, int pid, const std::function<void(const Json&)>& emit) {
  const auto& phases = run.plan.phase_templates[static_cast<std::size_t>(t.phases)];
  if (t.work <= 0 || phases.empty()) return;
  const double scale = static_cast<double>(tt.end - tt.start) / static_cast<double>(t.work);
  const std::string pass = t.name.substr(0, t.name.find('.'));  // "layer3"
  for (const LayerPhase& p : phases) {
    const Tick start = tt.start + static_cast<Tick>(static_cast<double>(p.start) * scale);
    const Tick end = std::min(tt.end, start + static_cast<Tick>(static_cast<double>(p.duration) * scale));
    if (end <= start) continue;
    int tid = 20;
    for (const auto& [dim, id] : inner_tracks)
      if (dim == p.dim) tid = id;
    emit({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"name", fmt::format("{}.{}", p.name, pass)}, {"cat", p.dim},
          {"ts", trace_us(start)}, {"dur", trace_us(end) - trace_us(start)}, {"args", {{"in", t.name}}}});
  }
}

void build(const StepResult& r, const std::function<void(const Json&)>& emit) {
  int pid = 0;
  for (const auto& run : r.runs) {
    const auto& tasks = run.plan.program.tasks;
    for (int stage = 0; stage < run.plan.program.stages; ++stage, ++pid) {
      emit({{"ph", "M"}, {"pid", pid}, {"name", "process_name"},
            {"args", {{"name", fmt::format("{} / pipeline stage {}", run.variant, stage)}}}});
      for (int s = 0; s < kStepStreams; ++s)
        emit({{"ph", "M"}, {"pid", pid}, {"tid", s + 1}, {"name", "thread_name"},
              {"args", {{"name", std::string(step_stream_name(static_cast<StepStream>(s)))}}}});
      for (const auto& [dim, tid] : inner_tracks)
        emit({{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"},
              {"args", {{"name", fmt::format("{} (inside layers)", dim)}}}});
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        const StepTask& t = tasks[i];
        if (t.stage != stage) continue;
        const TaskTime& tt = run.sim.times[i];
        Json args{{"alone_us", trace_us(t.work)}};
        if (t.link_bytes.nvlink > 0) args["tp_nvlink_bytes"] = t.link_bytes.nvlink;
        if (t.link_bytes.nic > 0) args["tp_nic_bytes"] = t.link_bytes.nic;
        if (t.communication) {
          args["dim"] = t.dim;
          args["link"] = std::string(link_tier_name(t.tier));
          args["sms"] = t.sms;
          args["wire_bytes"] = t.wire_bytes;
        }
        emit({{"ph", "X"}, {"pid", pid}, {"tid", static_cast<int>(t.stream) + 1}, {"name", t.name},
              {"cat", t.communication ? t.dim : "compute"}, {"ts", trace_us(tt.start)}, {"dur", trace_us(tt.end) - trace_us(tt.start)}, {"args", args}});
        if (t.phases >= 0) layer_phases(run, t, tt, pid, emit);
      }
      traffic_counters(run, stage, pid, emit);
    }
  }
}

}  // namespace

Json step_trace(const StepResult& r) {
  Json events = Json::array();
  build(r, [&](const Json& e) { events.push_back(e); });
  return Json{{"displayTimeUnit", "ns"}, {"otherData", other_data(r)}, {"traceEvents", events}};
}

void write_step_trace(const StepResult& r, OutputStream& out) {
  out.write(R"({"displayTimeUnit":"ns","otherData":)" + other_data(r).dump() + R"(,"traceEvents":[)");
  bool first = true;
  build(r, [&](const Json& e) {
    if (!first) out.write(",");  // (not "," + dump: GCC 12 warns falsely of an overflow there)
    out.write(e.dump());
    first = false;
  });
  out.write("]}\n");
}

void write_step_trace_file(const std::string& path, const StepResult& r) {
  OutputStream out(path);
  write_step_trace(r, out);
  out.commit();
}

}  // namespace tpsim
