// Speed, measured with Google Benchmark (not timed tests):
//   build/tpsim_bench --benchmark_filter=.
#include <benchmark/benchmark.h>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/calibration/calibrate.hpp"
#include "tpsim/core/simulator.hpp"
#include <filesystem>
#include <functional>

#include <fmt/format.h>
#include <sstream>

#include "tpsim/hw/block_scheduler.hpp"
#include "tpsim/hw/fabric.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/step/all_to_all.hpp"
#include "tpsim/step/training_step.hpp"
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

// The classic "hold" model: a steady population of pending events, each fired
// event scheduling one successor (a tpsim run keeps tens to hundreds pending).
void BM_EventLoopHold(benchmark::State& state) {
  const int population = static_cast<int>(state.range(0));
  constexpr int kEvents = 1'000'000;
  for (auto _ : state) {
    tpsim::Simulator sim;
    int fired = 0;
    std::uint32_t rng = 12345;
    std::function<void()> hold = [&] {
      rng = rng * 1664525u + 1013904223u;
      if (++fired + population <= kEvents) sim.schedule_after(1 + (rng >> 16) % 1000, hold);
    };
    for (int i = 0; i < population; ++i) sim.schedule_at(i, hold);
    sim.run();
    benchmark::DoNotOptimize(fired);
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * kEvents, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventLoopHold)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

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

// Blocks dispatched per second: a long GEMM-like kernel with a partial last wave
// and a second stream's kernel filling it, plus held communication blocks.
void BM_BlockScheduler(benchmark::State& state) {
  std::int64_t blocks = 0;
  for (auto _ : state) {
    tpsim::Simulator sim;
    tpsim::BlockScheduler sched(sim, tpsim::SmSpec{132, tpsim::BlockResources{2048, 65536, 233472, 32}, {}});
    const tpsim::BlockResources gemm{384, 384 * 168, 232448, 1}, small{512, 512 * 32, 0, 1};
    for (int k = 0; k < 200; ++k) {
      tpsim::KernelRequest a;
      a.block = k % 3 == 2 ? small : gemm;
      a.blocks = 1000 + 37 * k;
      a.draws_memory = true;
      a.block_work = [k] { return tpsim::BlockWork{.fixed = 100, .compute = 1000 + (k * 7919) % 500, .bytes = 2e6, .max_bytes_per_ps = 0.08}; };
      sched.launch(std::move(a));
    }
    sim.run();
    blocks += sched.blocks_dispatched();
  }
  state.counters["blocks/s"] = benchmark::Counter(static_cast<double>(blocks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BlockScheduler)->Unit(benchmark::kMillisecond);

// Fabric re-timing with many concurrent transfers: every GPU pulls from every
// other (all-to-all), transfers of different sizes ending one by one.
void BM_FabricRetiming(benchmark::State& state) {
  std::uint64_t solved = 0, transfers = 0;
  for (auto _ : state) {
    tpsim::Simulator sim;
    tpsim::FabricSpec spec;
    spec.topology = "switch";
    spec.nvlink = {0.396, 0};
    tpsim::Fabric fabric(sim, tpsim::Topology(spec, 8));
    for (int round = 0; round < 20; ++round)
      for (int s = 0; s < 8; ++s)
        for (int d = 0; d < 8; ++d)
          if (s != d) fabric.start(s, d, 1e6 * (1 + (s * 8 + d + round) % 13), 0, [] {}), ++transfers;
    sim.run();
    solved += fabric.rates_solved();
  }
  state.counters["transfers/s"] = benchmark::Counter(static_cast<double>(transfers), benchmark::Counter::kIsRate);
  state.counters["rates_solved/transfer"] = static_cast<double>(solved) / static_cast<double>(transfers);
}
BENCHMARK(BM_FabricRetiming)->Unit(benchmark::kMillisecond);

// Llama3 70B, 8 GPUs, 65536 tokens of 8192, forward + backward, one variant per run.
void run_llama70b(benchmark::State& state, int layers) {
  static const char* kVariants[] = {"baseline", "async_tp", "async_tp_single_stream", "async_tp_nccl", "ring", "ring_bidirectional", "fused"};
  const std::string variant = kVariants[state.range(0)];
  const tpsim::Scenario s = tpsim::parse_scenario(
      tpsim::Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16", "variants": ["{}"],
          "workload": {{"op": "transformer_layer", "model": "llama3_70b", "tokens": 65536, "seq_len": 8192,
                        "pass": "forward_backward", "layers": {}}}}})", variant, layers)), "");
  std::uint64_t events = 0;
  for (auto _ : state) {
    const auto r = tpsim::run_scenario(s, false);
    events += r.runs.front().timeline.events;
  }
  state.SetLabel(variant);
  state.counters["sim_events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
void BM_Llama70bLayer(benchmark::State& state) { run_llama70b(state, 1); }
void BM_Llama70bFullModel(benchmark::State& state) { run_llama70b(state, 80); }
BENCHMARK(BM_Llama70bLayer)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Llama70bFullModel)->DenseRange(0, 6)->Unit(benchmark::kSecond)->Iterations(1);

// The sweeps issue's yardstick: 10,000 points of allgather_matmul, two variants, 8 GPUs.
void BM_Sweep10k(benchmark::State& state) {
  std::vector<int> m_values, n_values;
  for (int i = 1; i <= 100; ++i) m_values.push_back(512 * i), n_values.push_back(128 * i);
  const std::string ms = fmt::format("{}", fmt::join(m_values, ",")), ns = fmt::format("{}", fmt::join(n_values, ","));
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

// The training-step issue's yardsticks: Llama3-405B on 16,384 GPUs (TP 8, PP 16, FSDP 128,
// interleaved 1F1B) and Llama3-70B on 256 GPUs (TP 8, FSDP 32), both async TP and baseline.
void run_step(benchmark::State& state, const std::string& json) {
  const tpsim::Scenario s = tpsim::parse_scenario(tpsim::Json::parse(json), "");
  std::size_t tasks = 0;
  for (auto _ : state) {
    const auto r = tpsim::run_training_step(s);
    tasks = r.runs.front().plan.program.tasks.size();
  }
  state.counters["tasks"] = static_cast<double>(tasks);
}
void BM_Step405b16k(benchmark::State& state) {
  run_step(state, R"({"hardware": "h100_sxm", "gpus": 16384, "dtype": "bf16", "variants": ["baseline", "async_tp"],
      "workload": {"op": "training_step", "model": "llama3_405b", "seq_len": 8192, "local_batch": 16,
                   "mesh": {"tp": 8, "pp": 16, "fsdp": 128}, "mesh_order": ["tp", "pp", "fsdp"],
                   "pp_schedule": "interleaved_1f1b", "virtual_stages": 2, "microbatches": 16}})");
}
void BM_Step70b256(benchmark::State& state) {
  run_step(state, R"({"hardware": "h100_sxm", "gpus": 256, "dtype": "bf16", "variants": ["baseline", "async_tp"],
      "workload": {"op": "training_step", "model": "llama3_70b", "seq_len": 8192, "local_batch": 2,
                   "mesh": {"tp": 8, "fsdp": 32}, "activation_checkpoint": "full"}})");
}
BENCHMARK(BM_Step405b16k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step70b256)->Unit(benchmark::kMillisecond);

// One MoE all-to-all over `ep` members on 8-GPU nodes as flows, re-solved as pieces land: even
// routing (arg 1 = 0) lands in two waves; a histogram with a different share for every member
// (arg 1 = 1) lands one receiver at a time, the worst case.
void BM_AllToAllFlows(benchmark::State& state) {
  const int ep = static_cast<int>(state.range(0));
  tpsim::GroupLayout g;
  g.ranks = ep, g.per_node = 8, g.nodes = ep / 8, g.leaves = 1;
  tpsim::AllToAllTraffic t{1e8, std::vector<double>(static_cast<std::size_t>(ep)), true};
  double sum = 0;
  for (int i = 0; i < ep; ++i) sum += (t.share[static_cast<std::size_t>(i)] = state.range(1) ? 1.0 + i % 97 : 1.0);
  for (double& x : t.share) x /= sum;
  for (auto _ : state) benchmark::DoNotOptimize(tpsim::all_to_all_transfer_ps(g, t, 450.0, 50.0, 1));
}
BENCHMARK(BM_AllToAllFlows)->Args({64, 0})->Args({64, 1})->Args({256, 0})->Args({256, 1})->Unit(benchmark::kMillisecond);

}  // namespace

// tpsim calibrate on the published H100 measurements (26 rows, 15 free parameters).
static void BM_CalibratePublished(benchmark::State& state) {
  tpsim::CalibrationRequest req;
  req.measurement_files = {tpsim::models_dir() + "/measurements/h100_sxm_published.json"};
  req.hardware = "h100_sxm";
  req.name = "bench";
  int evaluations = 0;
  for (auto _ : state) evaluations = tpsim::calibrate(req).report.evaluations;
  state.counters["simulations_of_the_set"] = evaluations;
}
BENCHMARK(BM_CalibratePublished)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
