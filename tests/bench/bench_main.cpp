// Speed, measured with Google Benchmark (not timed tests):
//   build/tpsim_bench --benchmark_filter=.
#include <benchmark/benchmark.h>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/core/simulator.hpp"
#include <filesystem>
#include <sstream>

#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/sweep/sweep_runner.hpp"

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

// The sweeps issue's yardstick: 10,000 points of allgather_matmul, two variants, 8 GPUs.
void BM_Sweep10k(benchmark::State& state) {
  std::string ms, ns;
  for (int i = 1; i <= 100; ++i) ms += (i > 1 ? "," : "") + std::to_string(512 * i);
  for (int i = 1; i <= 100; ++i) ns += (i > 1 ? "," : "") + std::to_string(128 * i);
  const tpsim::SweepSpec spec = tpsim::parse_sweep(
      R"({"base": {"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "variants": ["baseline", "async_tp"],
                   "workload": {"op": "allgather_matmul", "m": 4096, "k": 8192, "n": 3584}},
          "axes": {"workload.m": [)" + ms + R"(], "workload.n": [)" + ns + "]}}", "");
  const std::string out = (std::filesystem::temp_directory_path() / "tpsim_bench_sweep.csv").string();
  for (auto _ : state) {
    std::filesystem::remove(out);
    tpsim::SweepOptions o;
    o.output = out;
    o.jobs = static_cast<int>(state.range(0));
    std::ostringstream quiet;
    benchmark::DoNotOptimize(tpsim::run_sweep(spec, o, quiet).simulated);
  }
  std::filesystem::remove(out);
  state.counters["points/s"] = benchmark::Counter(10000.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Sweep10k)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
