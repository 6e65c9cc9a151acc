#include "measure_commands.hpp"

#include <algorithm>
#include <iostream>
#include <map>
#include <tuple>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tpsim/analysis/metrics.hpp"
#include "tpsim/app/side_by_side.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/microbench_plan.hpp"
#include "tpsim/cuda/gpu_executor.hpp"
#include "tpsim/cuda/launch_plan.hpp"
#include "tpsim/cuda/measure_on_gpus.hpp"
#include "tpsim/cuda/microbench_run.hpp"
#include "tpsim/cuda/stand_in.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/report/chrome_trace.hpp"
#include "tpsim/report/result_writers.hpp"
#include "tpsim/io/workload_kinds.hpp"
#include "write_file.hpp"

namespace tpsim::cli {

namespace {

std::string machine_name(int gpus) { return fmt::format("{} x {}", gpus, cuda_device_name(0)); }

// The kernel cuBLASLt's heuristic gave each GEMM of `dag` (asked once per shape).
std::map<OpId, std::string> gemm_kernels(const Dag& dag) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, Dtype>, std::string> by_shape;
  std::map<OpId, std::string> out;
  for (OpId id = 0; id < dag.size(); ++id) {
    const auto* g = std::get_if<GemmOp>(&dag.op(id).payload);
    if (!g) continue;
    const GemmProblem& p = g->problem;
    auto [it, fresh] = by_shape.try_emplace({p.m, p.n, p.k, p.batch, p.dtype});
    if (fresh) it->second = cuda_gemm_algo(p);
    out[id] = it->second;
  }
  return out;
}

}  // namespace

int measure(const std::string& scenario_file, const MeasureOptions& o) {
  for (const std::string& out : {o.output, o.trace})
    if (!out.empty()) check_output_path(out);  // before any GPU time is spent
  Scenario s = load_scenario_file(scenario_file);
  // The backend holds each GPU until the host has issued a repeat's launches (gpu_executor),
  // so it measures every op already enqueued: simulate, and record, that issue.
  s.software.op_issue = HostIssue::enqueued;
  if (is_training_step(s.workload))
    throw InputError(fmt::format("{}: $.workload.op: measure runs one TP group's op DAG; a training step is not one (tpsim run)", scenario_file));
  // A dozen repeats end before the power limit's averaging lowers the clock (as microbench's
  // rows): simulate, and record, a burst where the model gives its speed.
  if (s.hardware.power.burst_speed > 0) {
    s.software.burst_clock = true;
    s.hardware = run_by(std::move(s.hardware), s.software);
  }
  if (o.dry_run) {
    Json all = Json::array();
    for (const std::string& v : s.variants) {
      const Dag dag = build_dag(s, v);
      const LaunchPlan plan = plan_launches(dag);
      std::cout << fmt::format("== {}\n{}", v, format_launch_plan(plan, dag));
      all.push_back({{"variant", v}, {"plan", launch_plan_json(plan, dag)}});
    }
    if (!o.output.empty()) write_file(o.output, all.dump(2) + "\n");
    return 0;
  }
  RunResult simulated = run_scenario(s, !o.trace.empty());
  // Decided before any GPU work, so a scenario the backend cannot run fails the same way everywhere.
  for (const VariantRun& run : simulated.runs)
    if (const std::string op = first_op_gpu_cannot_run(run.dag); !op.empty() && !o.stand_in)
      throw InputError(fmt::format("variant \"{}\": {} is not run by the CUDA backend; measure other variants, or add "
                                   "--stand-in to hold every SM for its simulated time instead", run.variant, op));
  RunResult result{s, {}};
  int stand_ins = 0;
  for (std::size_t i = 0; i < s.variants.size(); ++i) {
    Dag dag = build_dag(s, s.variants[i]);
    GpuRunOptions run{.warmup = o.warmup, .repeats = o.repeat, .stand_in_us = stand_in_durations_us(dag, simulated.runs[i].timeline)};
    stand_ins += static_cast<int>(run.stand_in_us.size());
    const auto samples = run_on_gpus(dag, plan_launches(dag), run);
    Timeline tl = measured_timeline(dag, samples, cuda_sm_counts(dag.ranks()), run.stand_in_us);
    VariantMetrics m = analyze(dag, tl);
    result.runs.push_back(VariantRun{s.variants[i], std::move(dag), std::move(tl), std::move(m)});
  }
  Json j = result_json(result);
  for (std::size_t i = 0; i < result.runs.size(); ++i)
    j["results"][i]["op_times"] = op_times_json(result.runs[i], gemm_kernels(result.runs[i].dag));
  j["measured_on"] = machine_name(s.gpus);
  j["warmup"] = o.warmup;
  j["repeats"] = o.repeat;
  if (!o.output.empty()) write_file(o.output, j.dump(2) + "\n");
  std::cout << fmt::format("measured on {} (median of {} repeats after {} warm-up)\n", machine_name(s.gpus), o.repeat, o.warmup)
            << format_table(result) << "\nagainst the simulation on " << s.hardware.name << ":\n"
            << format_comparison(result, simulated);
  if (stand_ins > 0)
    std::cout << fmt::format("{} op(s) were stood in for (every SM held for the simulated time): their measured times are not "
                             "measurements, and calibration leaves them out\n", stand_ins);
  if (!o.trace.empty()) {
    write_trace_file(o.trace, side_by_side(std::move(result), std::move(simulated)), TraceOptions{});
    std::cout << fmt::format("trace: {} (measured and simulated, per variant; https://ui.perfetto.dev)\n", o.trace);
  }
  return 0;
}

int microbench(const MeasureOptions& o) {
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype) throw InputError(fmt::format("--dtype: unknown dtype \"{}\" (bf16, fp16, fp32 or fp8)", o.dtype));
  const int gpus = o.gpus > 0 ? o.gpus : (o.dry_run ? 8 : cuda_device_count());
  if (!o.dry_run && gpus > cuda_device_count())
    throw GpuError(fmt::format("--gpus {}: this machine has {} usable GPU(s)", gpus, cuda_device_count()));
  std::vector<Measurement> ms = microbench_measurements(gpus, *dtype);
  const auto wanted = [&](const Measurement& m) {
    if (o.only.empty()) return true;
    for (const std::string& text : o.only)
      if (m.name.find(text) != std::string::npos) return true;
    return false;
  };
  if (std::none_of(ms.begin(), ms.end(), wanted)) {
    std::vector<std::string> quoted;
    for (const std::string& text : o.only) quoted.push_back(fmt::format("\"{}\"", text));
    throw InputError(fmt::format("--only: no row's name contains {} (microbench --dry-run lists them)", fmt::join(quoted, " or ")));
  }
  if (o.dry_run) {
    for (const auto& m : ms) {
      if (!wanted(m)) continue;
      const MeasurementDag md = measurement_dag(m);
      std::cout << fmt::format("{:<52} {} GPU(s), {} launches\n", m.name, md.dag.ranks(), md.dag.size());
    }
    return 0;
  }
  if (gpus < 1) throw GpuError("no CUDA device found");
  check_output_path(o.output);
  const GpuRunOptions run{.warmup = o.warmup, .repeats = o.repeat, .stand_in_us = {}};
  const std::string machine = machine_name(gpus);
  const MicrobenchFiles files{o.output, fmt::format("tpsim microbench on {}, median of {} repeats", machine, o.repeat),
                              fmt::format("tpsim microbench on {}", machine)};
  const auto measure_row = [&](const Measurement& row) { return measure_microbench_row(row, run); };
  const MicrobenchOutcome done = run_microbench(ms, files, measure_row, std::cout, wanted);
  const int kept = done.measured + done.resumed;
  if (done.not_offered > 0)
    std::cout << fmt::format("{} row(s) time cuBLASLt algorithms this machine's heuristic does not offer: left out\n", done.not_offered);
  if (done.resumed > 0) std::cout << fmt::format("resumed: {} row(s) kept from the unfinished run\n", done.resumed);
  if (done.waiting > 0)
    std::cout << fmt::format("{} row(s) wait for a run without --only (or with other --only): {} marks the run unfinished\n", done.waiting,
                             progress_marker(o.output));
  if (!done.failed.empty()) {
    const std::string what = kept > 0 ? fmt::format("{} keeps the other {}", o.output, kept) : "nothing was written";
    std::cerr << fmt::format("tpsim: error: {} of {} rows failed on the GPUs (above); {}, and {} marks the run unfinished: "
                             "the same command measures only what is missing\n",
                             done.failed.size(), ms.size(), what, progress_marker(o.output));
    return 3;
  }
  std::cout << fmt::format("{}: {} measurements (tpsim calibrate --measurements {} --hardware ...)\n", o.output, kept, o.output);
  return 0;
}

}  // namespace tpsim::cli
