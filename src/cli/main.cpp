// tpsim command line. Exit codes: 0 ok, 2 bad input, 3 no usable GPU or a CUDA failure, 1 internal error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "huge_pages.hpp"
#include "measure_commands.hpp"
#include "tpsim/app/advise.hpp"
#include "tpsim/app/run_scenario.hpp"
#include "tpsim/calibration/calibrate.hpp"
#include "tpsim/calibration/validate.hpp"
#include "tpsim/core/invariant.hpp"
#include "tpsim/cuda/gpu_executor.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/hardware_report.hpp"
#include "tpsim/io/input_error.hpp"
#include "tpsim/io/json_reader.hpp"
#include "tpsim/io/output_file.hpp"
#include "tpsim/io/printable.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/report/chrome_trace.hpp"
#include "tpsim/report/result_writers.hpp"
#include "tpsim/report/step_result_writers.hpp"
#include "tpsim/report/step_trace.hpp"
#include "tpsim/io/workload_kinds.hpp"
#include "tpsim/sweep/sweep_runner.hpp"
#include "write_file.hpp"

using tpsim::cli::write_file;

namespace {

// Every output path named on the command line, checked before any work.
void check_outputs(std::initializer_list<std::string> paths) {
  for (const auto& p : paths)
    if (!p.empty()) tpsim::check_output_path(p);
}

struct TraceRequest {
  std::string file, ranks, detail = "full";
};

int training_step_command(const tpsim::Scenario& s, const TraceRequest& trace, const std::string& json_file) {
  const std::string& trace_file = trace.file;
  if (!trace.ranks.empty())
    throw tpsim::InputError("--trace-ranks: a training step's trace has one simulated rank per pipeline stage; trace them all");
  const tpsim::StepResult r = tpsim::run_training_step(s);
  if (!trace_file.empty()) tpsim::write_step_trace_file(trace_file, r);
  const std::string json = tpsim::step_result_json(r).dump(2) + "\n";
  if (json_file == "-") {
    std::cout << json;
  } else {
    if (!json_file.empty()) write_file(json_file, json);
    std::cout << tpsim::format_step_table(r);
    if (!trace_file.empty()) std::cout << fmt::format("trace: {} (open in https://ui.perfetto.dev)\n", trace_file);
  }
  for (const auto& run : r.runs)
    if (run.oom) std::cerr << fmt::format("tpsim: {}: out of memory on pipeline stage {} (see the table)\n", run.variant, run.peak_stage);
  return 0;
}

// More threads than a few per core only add memory and switching.
int capped_jobs(int jobs) {
  const int cap = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (jobs <= cap) return jobs;
  std::cerr << fmt::format("tpsim: note: --jobs {} is more than 4 per core; using {}\n", jobs, cap);
  return cap;
}

int advise_command(const std::string& scenario_file, int top, const std::string& json_file, int jobs) {
  check_outputs({json_file});
  const tpsim::Json doc = tpsim::read_json_file(scenario_file);
  const std::string dir = std::filesystem::path(scenario_file).parent_path().string();
  tpsim::Advice a;
  tpsim::Scenario base;
  try {
    base = tpsim::parse_scenario(doc, dir);
    a = tpsim::advise(doc, dir, static_cast<unsigned>(capped_jobs(jobs)));
  } catch (const tpsim::InputError& e) {
    throw tpsim::InputError(fmt::format("{}: {}", scenario_file, e.what()));
  }
  const std::string json = tpsim::advice_json(a, top).dump(2) + "\n";
  if (json_file == "-") {
    std::cout << json;
  } else {
    if (!json_file.empty()) write_file(json_file, json);
    std::cout << tpsim::format_advice(a, base, top);
  }
  return 0;
}

int run_command(const std::string& scenario_file, const TraceRequest& trace, const std::string& json_file) {
  const std::string& trace_file = trace.file;
  check_outputs({trace_file, json_file});
  const tpsim::Scenario s = tpsim::load_scenario_file(scenario_file);
  for (const std::string& note : s.notes) std::cerr << "tpsim: note: " << note << "\n";
  if (tpsim::is_training_step(s.workload)) return training_step_command(s, trace, json_file);
  tpsim::TraceOptions trace_options;
  trace_options.detail = trace.detail == "ops" ? tpsim::TraceDetail::ops : tpsim::TraceDetail::full;
  if (!trace.ranks.empty()) trace_options.ranks = tpsim::parse_trace_ranks(trace.ranks, s.gpus);
  const tpsim::RunResult r = tpsim::run_scenario(s, !trace_file.empty());
  if (!trace_file.empty()) tpsim::write_trace_file(trace_file, r, trace_options);
  const std::string json = tpsim::result_json(r).dump(2) + "\n";
  if (json_file == "-") {
    std::cout << json;
  } else {
    if (!json_file.empty()) write_file(json_file, json);
    std::cout << tpsim::format_table(r);
    if (!trace_file.empty()) std::cout << fmt::format("trace: {} (open in https://ui.perfetto.dev)\n", trace_file);
  }
  return 0;
}

int calibrate_command(tpsim::CalibrationRequest req, const std::string& output, const std::string& report_file) {
  if (req.name.empty()) req.name = std::filesystem::path(output).stem().string();
  const tpsim::Calibration c = tpsim::calibrate(req);
  for (const std::string& note : c.notes) std::cerr << "note: " << note << "\n";
  std::cout << fmt::format("{} measurements from {} file(s); starting from {}\n", c.measurements.size(), req.measurement_files.size(),
                           req.hardware)
            << tpsim::format_fit_report(c.report, c.measurements);
  if (c.not_fitted > 0)
    std::cout << fmt::format("not fitted: {} row(s), makespans of decomposed ops, fused kernels or layers and copies timed beside "
                             "GEMMs (validation only: predicted below)\n",
                             c.not_fitted);
  if (!c.validation.empty())
    std::cout << fmt::format("held out of the fit: {} measurements\n", c.validation.size())
              << tpsim::format_error_table(c.validation_before_us, c.validation_after_us, c.validation);
  write_file(output, c.hardware.dump(2) + "\n");
  // With -o - the model is on standard output; only a file can be named as "hardware".
  if (output != "-") std::cout << fmt::format("{}: hardware model \"{}\" (use it as \"hardware\": \"{}\")\n", output, req.name, output);
  if (!report_file.empty()) {
    tpsim::Json report = tpsim::fit_report_json(c.report, c.measurements);
    if (!c.validation.empty())
      report["validation"] = tpsim::prediction_rows_json(c.validation_before_us, c.validation_after_us, c.validation);
    write_file(report_file, report.dump(2) + "\n");
  }
  return 0;
}

int sweep_command(const std::string& file, const std::string& shard, tpsim::SweepOptions opts) {
  if (!shard.empty()) {
    char slash = 0;
    int used = 0;
    if (std::sscanf(shard.c_str(), "%d%c%d%n", &opts.shard_index, &slash, &opts.shard_count, &used) != 3 || slash != '/' ||
        used != static_cast<int>(shard.size()) || opts.shard_count < 1 || opts.shard_index < 0 || opts.shard_index >= opts.shard_count)
      throw tpsim::InputError(fmt::format("--shard: \"{}\" is not I/N with 0 <= I < N", shard));
  }
  opts.jobs = capped_jobs(opts.jobs);  // each thread also holds a window of rows
  opts.progress = isatty(STDERR_FILENO) != 0;
  if (const char* k = std::getenv("TPSIM_SWEEP_KILL_AFTER")) opts.kill_after = std::atoll(k);
  if (opts.output == "-" && !opts.markdown.empty())
    throw tpsim::InputError("--markdown: the table is made from the CSV file; with -o - there is none (write the CSV to a file)");
  check_outputs({opts.output, opts.markdown});
  std::error_code ec;
  if (std::filesystem::exists(opts.output, ec) && !std::filesystem::is_regular_file(opts.output, ec))
    throw tpsim::InputError(fmt::format("{}: not a regular file; a sweep writes (and resumes) a CSV file", opts.output));
  const tpsim::SweepSpec spec = tpsim::load_sweep_file(file);
  const auto summary = tpsim::run_sweep(spec, opts, std::cerr);
  // With -o - standard output carries the CSV, so the summary goes to standard error.
  (opts.output == "-" ? std::cerr : std::cout)
      << fmt::format("{}: {} points ({} already done, {} simulated)\n", opts.output, summary.points, summary.resumed, summary.simulated);
  if (!opts.markdown.empty()) std::cout << fmt::format("{}: Markdown table\n", opts.markdown);
  return 0;
}

}  // namespace

// "tpsim rn": CLI11 would say only that "rn" was not expected.
std::optional<std::string> unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), word) != names.end()) return std::nullopt;
  std::string msg = fmt::format("unknown command \"{}\"", word);
  if (auto c = tpsim::closest_match(word, names)) return msg + fmt::format(" (did you mean \"{}\"?)", *c);
  return msg + fmt::format(" (commands: {})", fmt::join(names, ", "));
}

int main(int argc, char** argv) {
  tpsim::cli::restart_with_huge_pages(argv);
  CLI::App app{"tpsim: tensor-parallel communication/computation overlap simulator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>([] { return fmt::format("tpsim {} (models: {})", TPSIM_VERSION, tpsim::models_dir()); }));
  std::string scenario, json;
  TraceRequest trace;
  auto* run = app.add_subcommand("run", "simulate every variant of a scenario");
  run->add_option("scenario", scenario, "scenario JSON file")->required();
  run->add_option("--trace", trace.file, "write a Chrome trace (Perfetto) to FILE");
  run->add_option("--trace-ranks", trace.ranks, "trace only these GPUs (comma-separated ranks, e.g. 0,1)");
  run->add_option("--trace-detail", trace.detail, "full (ops, SM and NVLink counters, dependency arrows) or ops")
      ->check(CLI::IsMember({"full", "ops"}));
  run->add_option("--json", json, "write the result JSON to FILE, or - for stdout (replaces the table)");
  auto* advise = app.add_subcommand("advise", "rank the meshes, schedules and checkpointing that fit a training step's model, GPUs and batch");
  std::string advise_scenario, advise_json;
  int advise_top = 10, advise_jobs = 0;
  advise->add_option("scenario", advise_scenario, "training_step scenario JSON file (its model, GPUs, hardware and global batch)")->required();
  advise->add_option("--top", advise_top, "how many to show (default 10)")->check(CLI::Range(1, 100000));
  advise->add_option("--json", advise_json, "write the ranking as JSON to FILE, or - for stdout (replaces the table)");
  advise->add_option("--jobs", advise_jobs, "threads (default: every core)")->check(CLI::NonNegativeNumber);
  auto* hardware = app.add_subcommand("hardware", "list the shipped hardware models, or show one");
  hardware->require_subcommand(1);
  auto* hw_list = hardware->add_subcommand("list", "one line per model in models/");
  std::string hw_name;
  auto* hw_show = hardware->add_subcommand("show", "every parameter of a model, with unit and source");
  hw_show->add_option("name", hw_name, "model name (file stem in models/) or path to a hardware JSON")->required();
  auto* workloads = app.add_subcommand("workloads", "the workloads a scenario can name: keys, GPUs and variants of each");
  tpsim::SweepOptions sweep_opts;
  std::string sweep_file, shard;
  auto* sweep = app.add_subcommand("sweep", "simulate a sweep of scenarios in parallel; resumable");
  sweep->add_option("sweep", sweep_file, "sweep JSON file")->required();
  sweep->add_option("-o,--output", sweep_opts.output, "CSV of results (default results.csv; - writes it to standard output, not resumable)");
  sweep->add_option("--markdown", sweep_opts.markdown, "also write a Markdown table of speedups");
  sweep->add_option("--jobs", sweep_opts.jobs, "threads (default: every core)")->check(CLI::NonNegativeNumber);
  sweep->add_option("--shard", shard, "I/N: run the I-th of N deterministic slices of the points (0-based)");
  std::string measure_scenario;
  tpsim::cli::MeasureOptions mo;
  auto* measure = app.add_subcommand("measure", "run each variant's op DAG on real GPUs; writes the result JSON and trace format of run");
  measure->add_option("scenario", measure_scenario, "scenario JSON file")->required();
  measure->add_option("-o,--output", mo.output, "measured result JSON (with --dry-run: the launch plan as JSON)");
  measure->add_option("--trace", mo.trace, "write the measured timeline as a Chrome trace (Perfetto)");
  measure->add_option("--repeat", mo.repeat, "timed repeats; each op's median is reported (default 10)")->check(CLI::PositiveNumber);
  measure->add_option("--warmup", mo.warmup, "untimed repeats first (default 3)")->check(CLI::NonNegativeNumber);
  measure->add_flag("--dry-run", mo.dry_run, "print each rank's CUDA launch plan instead of running it (no GPU needed)");
  measure->add_flag("--stand-in", mo.stand_in,
                    "ops the backend cannot run (flash attention, the fused ring GEMM): hold every SM for their simulated time");
  tpsim::cli::MeasureOptions mb;
  auto* microbench = app.add_subcommand("microbench", "measure what calibration needs on this machine's GPUs");
  microbench->add_option("-o,--output", mb.output, "measurement file to write (default micro.json)");
  mb.output = "micro.json";
  microbench->add_option("--gpus", mb.gpus, "GPUs for multi-GPU measurements (default: every GPU)")->check(CLI::PositiveNumber);
  microbench->add_option("--dtype", mb.dtype, "GEMM dtype (default bf16)");
  microbench->add_option("--repeat", mb.repeat, "timed repeats (default 10)")->check(CLI::PositiveNumber);
  microbench->add_option("--warmup", mb.warmup, "untimed repeats first (default 3)")->check(CLI::NonNegativeNumber);
  microbench->add_flag("--dry-run", mb.dry_run, "list the measurements instead of running them");
  microbench->add_option("--only", mb.only,
                         "measure only the rows whose names contain TEXT (repeatable); the rest wait in the unfinished run, "
                         "which the same command without --only completes");
  tpsim::CalibrationRequest calib;
  std::string calib_out, calib_report, calib_only;
  auto* calibrate = app.add_subcommand("calibrate", "fit a hardware model's physical parameters to measurements");
  calibrate->add_option("--measurements", calib.measurement_files,
                        "measurement files, PyTorch profiler traces or tpsim measure results")->required();
  calibrate->add_option("--validate", calib.validation_files,
                        "measurements held out of the fit: their error before and after shows whether it generalises");
  calibrate->add_option("--hardware", calib.hardware, "starting model (name in models/ or path)")->required();
  calibrate->add_option("-o,--output", calib_out, "calibrated hardware JSON to write")->required();
  calibrate->add_option("--name", calib.name, "the new model's name (default: the output file's stem)");
  calibrate->add_option("--max-evals", calib.fit.max_evaluations, "most simulations of the measurement set (default 400)")
      ->check(CLI::PositiveNumber);
  calibrate->add_option("--params", calib_only, "comma-separated substrings: fit only parameters whose pointer contains one");
  calibrate->add_option("--parameters-file", calib.parameters_file, "ranges of the fittable parameters (default models/calibration/parameters.json)");
  calibrate->add_option("--report", calib_report, "write per-measurement predictions before/after as JSON");
  tpsim::ValidationRequest val;
  std::string val_json;
  auto* validate = app.add_subcommand("validate", "predicted vs measured per row and per op class, optionally leave-one-source-out");
  validate->add_option("files", val.files, "measurement files, PyTorch profiler traces or tpsim measure results")->required();
  validate->add_option("--hardware", val.hardware, "the model to check (name in models/ or path)")->required();
  validate->add_flag("--cross-validate", val.cross_validate,
                     "hold each source out in turn: fit the op-level rows of the others, predict it");
  validate->add_option("--max-evals", val.fit.max_evaluations, "most simulations per cross-validation fit (default 400)")
      ->check(CLI::PositiveNumber);
  validate->add_option("--json", val_json, "write the rows as JSON");
  std::vector<std::string> merge_inputs;
  std::string merge_output, merge_markdown;
  auto* merge = app.add_subcommand("merge", "join the CSVs of a sweep's shards into one");
  merge->add_option("inputs", merge_inputs, "shard CSV files")->required();
  merge->add_option("-o,--output", merge_output, "merged CSV")->required();
  merge->add_option("--markdown", merge_markdown, "also write a Markdown table of speedups");
  if (auto unknown = unknown_subcommand(app, argc, argv)) {
    std::cerr << "tpsim: error: " << *unknown << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (*run) return run_command(scenario, trace, json);
    if (*advise) return advise_command(advise_scenario, advise_top, advise_json, advise_jobs);
    if (*sweep) return sweep_command(sweep_file, shard, sweep_opts);
    if (*calibrate) {
      std::string item;
      for (std::istringstream in(calib_only); std::getline(in, item, ',');)
        if (!item.empty()) calib.fit.only.push_back(item);
      check_outputs({calib_out, calib_report});
      return calibrate_command(calib, calib_out, calib_report);
    }
    if (*validate) {
      check_outputs({val_json});
      const tpsim::Validation v = tpsim::validate(val);
      for (const std::string& note : v.notes) std::cerr << "tpsim: note: " << note << "\n";
      std::cout << tpsim::format_validation(v);
      if (!val_json.empty()) write_file(val_json, tpsim::validation_json(v).dump(2) + "\n");
      return 0;
    }
    if (*measure) return tpsim::cli::measure(measure_scenario, mo);
    if (*microbench) return tpsim::cli::microbench(mb);
    if (*merge) {
      check_outputs({merge_output, merge_markdown});
      tpsim::merge_sweep_csvs(merge_inputs, merge_output);
      if (!merge_markdown.empty()) tpsim::write_markdown_from_csv(merge_output, merge_markdown);
      return 0;
    }
    if (*workloads) std::cout << tpsim::describe_workloads();
    if (*hw_list) std::cout << tpsim::hardware_list();
    if (*hw_show) std::cout << tpsim::hardware_show(hw_name);
  } catch (const tpsim::OutputError& e) {
    std::cerr << "tpsim: error: " << tpsim::printable(e.what()) << "\n";
    return 1;
  } catch (const tpsim::SimulationLimit& e) {
    std::cerr << "tpsim: error: " << tpsim::printable(e.what()) << "\n";
    return 2;
  } catch (const tpsim::GpuError& e) {
    std::cerr << "tpsim: error: " << tpsim::printable(e.what()) << "\n";
    return 3;
  } catch (const tpsim::InputError& e) {
    std::cerr << "tpsim: error: " << tpsim::printable(e.what()) << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "tpsim: error: out of memory: the model is too large for this machine (simulate fewer layers or GPUs; "
                 "trace fewer ranks with --trace-ranks)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tpsim: internal error: " << tpsim::printable(e.what()) << "\n";
    return 1;
  }
  return 0;
}
