#include "tpsim/sweep/sweep_table.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "tpsim/io/printable.hpp"
#include "tpsim/io/workload_kinds.hpp"

namespace tpsim {

namespace {

std::string csv_field(const std::string& raw) {
  const std::string s = printable(raw);  // one row is one line, always
  if (s.find_first_of(",\"") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A Markdown cell: a '|' would end it early.
std::string md_cell(const std::string& s) {
  std::string out;
  for (const char c : printable(s)) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

constexpr const char* kMetricColumns =
    "variant,makespan_us,speedup_vs_baseline,exposed_comm_us,sm_utilization,link_utilization,best_variant,sweep";
// A training step's: time and speedup stay in the same places, so the Markdown table reads both.
constexpr const char* kStepMetricColumns =
    "variant,step_time_ms,speedup_vs_baseline,tokens_per_s_per_gpu,mfu,peak_memory_gib,oom,bubble_fraction,"
    "exposed_tp_ms,exposed_cp_ms,exposed_ep_ms,exposed_fsdp_ms,exposed_dp_ms,exposed_pp_ms,best_variant,sweep";

std::string row_prefix(const SweepSpec& spec, std::int64_t point) {
  std::vector<std::string> cells{std::to_string(point)};
  for (const auto& v : spec.values_of(point)) cells.push_back(csv_field(value_text(v)));
  return fmt::format("{}", fmt::join(cells, ","));
}

}  // namespace

bool is_training_sweep(const SweepSpec& spec) {
  if (!spec.base.is_object() || !spec.base.contains("workload")) return false;
  const WorkloadKind* kind = workload_kind_named_in(spec.base["workload"]);
  return kind && kind->whole_step;
}

std::string sweep_step_csv_rows(const SweepSpec& spec, std::int64_t point, const StepResult& result, const std::string& sweep_id) {
  const std::string prefix = row_prefix(spec, point);
  // The best variant is the fastest that fits in memory (the fastest of all when none fits).
  const StepVariantRun* best = nullptr;
  for (const auto& run : result.runs)
    if (!best || (best->oom && !run.oom) || (best->oom == run.oom && run.sim.makespan < best->sim.makespan)) best = &run;
  std::string out;
  for (const auto& run : result.runs) {
    const auto sp = result.speedup(run);
    std::string exposed;  // ms per mesh dimension, in the header's order
    for (MeshDim d : kAllMeshDims) exposed += fmt::format("{:.3f},", static_cast<double>(run.exposed(std::string(mesh_dim_name(d)))) * 1e-9);
    out += fmt::format("{},{},{:.3f},{},{:.1f},{:.4f},{:.2f},{},{:.4f},{}{},{}\n", prefix, run.variant,
                       static_cast<double>(run.sim.makespan) * 1e-9, sp ? fmt::format("{:.4f}", *sp) : "", run.tokens_per_s_per_gpu,
                       run.mfu, run.peak_memory_bytes / 1073741824.0, run.oom ? "true" : "false", run.bubble_fraction, exposed,
                       best->variant, sweep_id);
  }
  return out;
}

std::string sweep_csv_header(const SweepSpec& spec) {
  std::vector<std::string> columns{"point"};
  for (const auto& a : spec.axes) columns.push_back(csv_field(a.field));
  return fmt::format("{},{}\n", fmt::join(columns, ","), is_training_sweep(spec) ? kStepMetricColumns : kMetricColumns);
}

std::string sweep_csv_rows(const SweepSpec& spec, std::int64_t point, const RunResult& result, const std::string& sweep_id) {
  const std::string prefix = row_prefix(spec, point);
  const VariantRun* best = nullptr;
  for (const auto& run : result.runs)
    if (!best || run.metrics.makespan < best->metrics.makespan) best = &run;
  std::string out;
  for (const auto& run : result.runs) {
    const auto& m = run.metrics;
    const auto sp = result.speedup(run);
    const auto fraction = [](const std::optional<double>& u) { return u ? fmt::format("{:.4f}", *u) : std::string(); };
    out += fmt::format("{},{},{:.3f},{},{:.3f},{},{},{},{}\n", prefix, run.variant, to_us(m.makespan),
                       sp ? fmt::format("{:.4f}", *sp) : "", to_us(m.exposed_comm), fraction(m.sm_utilization),
                       fraction(m.link_utilization), best->variant, sweep_id);
  }
  return out;
}

bool split_csv_line(const std::string& line, std::vector<std::string>& fields) {
  fields.clear();
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (quoted) return false;
  fields.push_back(std::move(cur));
  return true;
}

std::string sweep_markdown(std::istream& csv) {
  std::string line;
  std::vector<std::string> header, f;
  if (!std::getline(csv, line) || !split_csv_line(line, header)) return "";
  const auto variant_col = std::find(header.begin(), header.end(), "variant");
  const auto best_col = std::find(header.begin(), header.end(), "best_variant");
  if (variant_col == header.end() || best_col == header.end()) return "";
  const std::size_t axes = static_cast<std::size_t>(variant_col - header.begin()) - 1;  // point, axes..., variant, ...
  const std::size_t best_at = static_cast<std::size_t>(best_col - header.begin());
  struct Point {
    std::vector<std::string> axis_values;
    std::map<std::string, std::pair<std::string, std::string>> by_variant;  // makespan, speedup
    std::string best;
  };
  std::vector<Point> points;
  std::vector<std::string> variants;
  bool have_baseline = false;
  std::string last_point;
  while (std::getline(csv, line)) {
    if (!split_csv_line(line, f) || f.size() != header.size()) continue;
    if (f[0] != last_point) {
      points.push_back({std::vector<std::string>(f.begin() + 1, f.begin() + 1 + static_cast<long>(axes)), {}, f[best_at]});
      last_point = f[0];
    }
    const std::string& v = f[1 + axes];
    if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
    have_baseline |= v == "baseline";
    points.back().by_variant[v] = {f[2 + axes], f[3 + axes]};
  }
  std::vector<std::string> shown;
  for (const auto& v : variants)
    if (!have_baseline || v != "baseline") shown.push_back(v);
  std::string out = "|";
  for (std::size_t a = 0; a < axes; ++a) out += fmt::format(" {} |", md_cell(header[1 + a]));
  const std::string unit = header[2 + axes] == "step_time_ms" ? "ms" : "us";
  for (const auto& v : shown) out += fmt::format(" {} {} |", v, have_baseline ? "speedup" : unit);
  out += " best |\n|";
  for (std::size_t c = 0; c < axes + shown.size() + 1; ++c) out += "---|";
  out += "\n";
  for (const auto& p : points) {
    out += "|";
    for (const auto& a : p.axis_values) out += fmt::format(" {} |", md_cell(a));
    for (const auto& v : shown) {
      const auto it = p.by_variant.find(v);
      const std::string cell = it == p.by_variant.end() ? "" : have_baseline ? it->second.second + "x" : it->second.first;
      out += " " + (v == p.best ? "**" + cell + "**" : cell) + " |";
    }
    out += " " + p.best + " |\n";
  }
  return out;
}

}  // namespace tpsim
