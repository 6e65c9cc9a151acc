#include "tpsim/app/side_by_side.hpp"

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
  return out;
}

}  // namespace tpsim
