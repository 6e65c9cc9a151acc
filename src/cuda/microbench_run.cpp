#include "tpsim/cuda/microbench_run.hpp"

#include <filesystem>
#include <map>
#include <ostream>
#include <set>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "tpsim/cuda/gpu_executor.hpp"
#include "tpsim/io/input_error.hpp"
#include "tpsim/io/output_file.hpp"

namespace tpsim {

namespace {

// The rows an unfinished run kept, by name; empty when there is none to resume.
std::map<std::string, Measurement> kept_rows(const std::vector<Measurement>& plan, const MicrobenchFiles& files) {
  std::map<std::string, Measurement> kept;
  std::set<std::string> planned;  // a resumed run tells rows apart by name
  for (const Measurement& m : plan)
    if (!planned.insert(m.name).second) throw std::logic_error("microbench plans two rows named " + m.name);
  const std::string marker = progress_marker(files.output);
  std::error_code ec;
  if (!std::filesystem::exists(marker, ec) || !std::filesystem::exists(files.output, ec)) return kept;
  for (Measurement& m : load_measurements_file(files.output)) {
    if (m.source != files.source)
      throw InputError(fmt::format("{}: an unfinished microbench whose row \"{}\" was measured as \"{}\", where this run is \"{}\": "
                                   "resume it with the same GPUs and --repeat, or remove {} to start afresh",
                                   files.output, m.name, m.source, files.source, marker));
    if (!planned.contains(m.name))
      throw InputError(fmt::format("{}: an unfinished microbench with a row this run does not plan (\"{}\": another --dtype or "
                                   "--gpus?): resume it with the same options, or remove {} to start afresh",
                                   files.output, m.name, marker));
    kept.emplace(m.name, std::move(m));
  }
  return kept;
}

}  // namespace

std::string progress_marker(const std::string& output) { return output + ".progress"; }

MicrobenchOutcome run_microbench(const std::vector<Measurement>& plan, const MicrobenchFiles& files,
                                 const std::function<std::optional<Measurement>(const Measurement&)>& measure, std::ostream& log,
                                 const std::function<bool(const Measurement&)>& wanted) {
  // Every row the file holds, measured now or kept: each save writes them all in the plan's order,
  // so a stop at any row loses none of them.
  std::map<std::string, Measurement> have = kept_rows(plan, files);
  const std::string marker = progress_marker(files.output);
  write_output_file(marker, "an unfinished tpsim microbench: the same command resumes it\n");
  MicrobenchOutcome out;
  out.resumed = static_cast<int>(have.size());
  const auto save = [&] {
    std::vector<Measurement> rows;
    for (const Measurement& row : plan)
      if (auto it = have.find(row.name); it != have.end()) rows.push_back(it->second);
    write_output_file(files.output, measurements_file_json(rows, "", files.description).dump(2) + "\n");
  };
  for (const Measurement& row : plan) {
    if (have.count(row.name)) continue;
    if (wanted && !wanted(row)) {
      ++out.waiting;
      continue;
    }
    try {
      std::optional<Measurement> measured = measure(row);
      if (!measured) {
        log << fmt::format("{:<52} not offered here: left out\n", row.name);
        ++out.not_offered;
        continue;
      }
      Measurement m = std::move(*measured);
      m.source = files.source;
      log << fmt::format("{:<52} {:>12.2f} us{}\n", m.name, m.time_us, m.kernel.empty() ? "" : "  " + m.kernel);
      have.emplace(row.name, std::move(m));
      ++out.measured;
      save();  // a stop after this row keeps it
    } catch (const GpuError& e) {
      log << fmt::format("{:<52} failed: {}\n", row.name, e.what());
      out.failed.push_back(fmt::format("{}: {}", row.name, e.what()));
    }
  }
  if (out.failed.empty() && out.waiting == 0) {
    std::error_code ec;
    std::filesystem::remove(marker, ec);
    if (ec) throw OutputError(fmt::format("{}: could not remove the progress marker ({}); {} is whole", marker, ec.message(), files.output));
  }
  return out;
}

}  // namespace tpsim
