#include "tpsim/app/side_by_side.hpp"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace tpsim {

namespace {

void check_pairs(const RunResult& measured, const RunResult& simulated) {
  if (measured.runs.size() != simulated.runs.size())
    throw std::invalid_argument("measured and simulated results hold different variants");
  for (std::size_t i = 0; i < measured.runs.size(); ++i)
    if (measured.runs[i].variant != simulated.runs[i].variant)
      throw std::invalid_argument(fmt::format("variant {} is \"{}\" measured, \"{}\" simulated", i, measured.runs[i].variant,
                                              simulated.runs[i].variant));
  for (std::size_t i = 0; i < measured.runs.size(); ++i)
    if (measured.runs[i].dag.size() != simulated.runs[i].dag.size())
      throw std::invalid_argument(fmt::format("variant \"{}\" has different DAGs measured and simulated", measured.runs[i].variant));
}

// Device time per op kind, summed over the run's ops and divided by its ranks; ops the
// measured run stood in for (simulated time on the GPU) are left out on both sides.
std::map<std::string, double> busy_us_by_kind(const VariantRun& run, const Timeline& measured) {
  std::map<std::string, double> out;
  for (OpId id = 0; id < run.dag.size(); ++id) {
    const Op& op = run.dag.op(id);
    if (op_class(op) == OpClass::event || measured.ops[id].stand_in) continue;
    const OpTiming& t = run.timeline.ops[id];
    out[std::string(op_kind_name(op))] += to_us(t.end - t.start) / run.dag.ranks();
  }
  return out;
}

}  // namespace

RunResult side_by_side(RunResult measured, RunResult simulated) {
  check_pairs(measured, simulated);
  RunResult both{measured.scenario, {}};
  for (std::size_t i = 0; i < measured.runs.size(); ++i) {
    VariantRun m = std::move(measured.runs[i]);
    m.variant += " measured";
    VariantRun s = std::move(simulated.runs[i]);
    s.variant += " simulated";
    both.runs.push_back(std::move(m));
    both.runs.push_back(std::move(s));
  }
  return both;
}

std::string format_comparison(const RunResult& measured, const RunResult& simulated) {
  check_pairs(measured, simulated);
  std::string out = fmt::format("{:<22} {:>14} {:>14} {:>8}   {:>9} {:>9}\n", "variant", "measured_us", "simulated_us", "error",
                                "speedup", "simulated");
  for (std::size_t i = 0; i < measured.runs.size(); ++i) {
    const VariantRun& m = measured.runs[i];
    const VariantRun& s = simulated.runs[i];
    const double mus = to_us(m.metrics.makespan), sus = to_us(s.metrics.makespan);
    const auto msp = measured.speedup(m), ssp = simulated.speedup(s);
    out += fmt::format("{:<22} {:>14.1f} {:>14.1f} {:>+7.1f}%   {:>9} {:>9}\n", m.variant, mus, sus, mus > 0 ? 100 * (sus / mus - 1) : 0.0,
                       msp ? fmt::format("{:.3f}x", *msp) : "-", ssp ? fmt::format("{:.3f}x", *ssp) : "-");
  }
  // Which kind of op the model misses: device time per rank, kind by kind.
  out += fmt::format("\n{:<22} {:<12} {:>14} {:>14} {:>8}\n", "variant", "op kind", "measured_us", "simulated_us", "error");
  for (std::size_t i = 0; i < measured.runs.size(); ++i) {
    const Timeline& marks = measured.runs[i].timeline;
    const auto m = busy_us_by_kind(measured.runs[i], marks), s = busy_us_by_kind(simulated.runs[i], marks);
    for (const auto& [kind, mus] : m) {
      const double sus = s.count(kind) ? s.at(kind) : 0.0;
      out += fmt::format("{:<22} {:<12} {:>14.1f} {:>14.1f} {:>8}\n", measured.runs[i].variant, kind, mus, sus,
                         mus > 0 ? fmt::format("{:+.1f}%", 100 * (sus / mus - 1)) : "-");
    }
  }
  return out;
}

}  // namespace tpsim
