#include "tpsim/report/result_writers.hpp"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "tpsim/cost/l2_writeback.hpp"
#include "tpsim/cost/reduction_cost.hpp"
#include "tpsim/io/json_numbers.hpp"
#include "tpsim/io/printable.hpp"

namespace tpsim {

namespace {

// A utilization as a percentage for the table, "-" where it was not measured.
std::string percent(const std::optional<double>& u) { return u ? fmt::format("{:.1f}", 100 * *u) : "-"; }
Json fraction(const std::optional<double>& u) { return u ? Json(round_to(*u, 4)) : Json(nullptr); }

std::string path_summary(const CriticalPath& cp) {
  std::vector<std::pair<Tick, std::string>> parts;
  Tick total = 0;
  for (const auto& [kind, t] : cp.by_kind) parts.emplace_back(t, kind), total += t;
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<std::string> out;
  for (const auto& [t, kind] : parts)
    out.push_back(fmt::format("{} {:.0f}%", kind, 100.0 * static_cast<double>(t) / static_cast<double>(total)));
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace

std::string format_table(const RunResult& r) {
  const Scenario& s = r.scenario;
  const Workload& w = s.workload;
  const std::string shape = w.n.empty()
      ? fmt::format("{} tokens={} seq_len={} layers={}", w.model.name, w.tokens, w.seq_len, w.layers)
      : fmt::format("m={} k={} n={}", w.m, w.k, fmt::join(w.n, "+"));
  std::string out = fmt::format("{}: {} {} {} on {} x {}\n", s.name.empty() ? "scenario" : printable(s.name), w.op, shape,
                                dtype_name(s.dtype), s.gpus, s.hardware.name);
  out += fmt::format("{:<22} {:>12} {:>8} {:>15} {:>6} {:>6}  {}\n", "variant", "makespan_us", "speedup", "exposed_comm_us",
                     "SM%", "link%", "critical path");
  for (const auto& run : r.runs) {
    const auto& m = run.metrics;
    const auto sp = r.speedup(run);
    out += fmt::format("{:<22} {:>12.1f} {:>8} {:>15.1f} {:>6} {:>6}  {}\n", run.variant, to_us(m.makespan),
                       sp ? fmt::format("{:.3f}x", *sp) : "-", to_us(m.exposed_comm), percent(m.sm_utilization),
                       percent(m.link_utilization), path_summary(m.critical_path));
  }
  return out;
}

Json result_json(const RunResult& r) {
  const Scenario& s = r.scenario;
  Json j = scenario_header_json(s);
  j["software"] = {{"symm_mem_reduction", std::string(reduction_kernel_name(s.software.symm_mem_reduction))},
                   {"op_issue", std::string(host_issue_name(s.software.op_issue))},
                   {"nccl_nvls", s.software.nccl_nvls},
                   {"nccl_collnet", s.software.nccl_collnet},
                   {"async_tp_regions", s.software.async_tp_every_region ? "every" : "micro_pipeline"},
                   {"clock", s.software.burst_clock ? "burst" : "sustained"},
                   {"gemm_choice", s.software.fastest_gemm ? "fastest" : "library"},
                   {"l2", std::string(l2_start_name(s.software.l2_start))}};
  j["results"] = Json::array();
  for (const auto& run : r.runs) {
    const auto& m = run.metrics;
    Json v;
    v["variant"] = run.variant;
    v["makespan_us"] = round_to(to_us(m.makespan), 3);
    const auto sp = r.speedup(run);
    v["speedup_vs_baseline"] = sp ? Json(round_to(*sp, 4)) : Json(nullptr);
    v["exposed_comm_us"] = round_to(to_us(m.exposed_comm), 3);
    v["sm_utilization"] = fraction(m.sm_utilization);
    v["link_utilization"] = fraction(m.link_utilization);
    v["tflops_per_gpu"] = m.makespan > 0 ? round_to(m.flops / s.gpus / (static_cast<double>(m.makespan) * 1e-12) / 1e12, 2) : 0.0;
    Json cp;
    for (const auto& [kind, t] : m.critical_path.by_kind) cp[kind + "_us"] = round_to(to_us(t), 3);
    Json path = Json::array();
    for (OpId id : m.critical_path.ops) {
      const Op& op = run.dag.op(id);
      if (op_class(op) == OpClass::event) continue;
      path.push_back(fmt::format("rank{}:{}", op.rank, op.name));
    }
    v["critical_path"] = {{"by_kind", cp}, {"ops", path}};
    v["ops"] = run.dag.size();
    v["simulated_events"] = run.timeline.events;
    v["simulated_blocks"] = run.timeline.blocks;
    const auto stand_ins = std::count_if(run.timeline.ops.begin(), run.timeline.ops.end(), [](const OpTiming& t) { return t.stand_in; });
    if (stand_ins > 0) v["stand_in_ops"] = stand_ins;  // measured runs: ops held for their simulated time
    j["results"].push_back(v);
  }
  return j;
}

Json op_times_json(const VariantRun& run, const std::map<OpId, std::string>& kernels) {
  Json ops = Json::array();
  for (OpId id = 0; id < run.dag.size(); ++id) {
    const Op& op = run.dag.op(id);
    if (op_class(op) == OpClass::event) continue;
    const OpTiming& t = run.timeline.ops[id];
    ops.push_back({{"rank", op.rank},
                   {"stream", op.stream},
                   {"op", op.name},
                   {"kind", std::string(op_kind_name(op))},
                   {"start_us", round_to(to_us(t.start), 3)},
                   {"end_us", round_to(to_us(t.end), 3)}});
    if (t.stand_in) ops.back()["stand_in"] = true;
    if (const auto k = kernels.find(id); k != kernels.end()) ops.back()["kernel"] = k->second;
  }
  return ops;
}

}  // namespace tpsim
