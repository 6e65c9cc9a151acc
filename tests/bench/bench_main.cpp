// Speed, measured with Google Benchmark (not timed tests):
//   build/tpsim_bench --benchmark_filter=.
#include <benchmark/benchmark.h>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/core/simulator.hpp"
#include "tpsim/io/hardware_loader.hpp"

namespace {

void BM_EventQueue(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    tpsim::Simulator sim;
    std::uint64_t sum = 0;
    for (int i = 0; i < n; ++i) sim.schedule_at((i * 7919) % 100000, [&sum, i] { sum += static_cast<std::uint64_t>(i); });
    sim.run();
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventQueue)->Arg(100000);

void BM_Quickstart(benchmark::State& state) {
  const tpsim::Scenario s = tpsim::load_scenario_file(std::string(TPSIM_SOURCE_DIR) + "/scenarios/quickstart.json");
  std::uint64_t events = 0;
  for (auto _ : state) {
    const auto r = tpsim::run_scenario(s);
    for (const auto& run : r.runs) events += run.timeline.events;
    benchmark::DoNotOptimize(r.runs.size());
  }
  state.counters["sim_events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Quickstart)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
