#include "tpsim/sweep/sweep_runner.hpp"

#include <algorithm>
#include <csignal>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "tpsim/app/run_scenario.hpp"
#include "tpsim/core/invariant.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/json_reader.hpp"
#include "tpsim/io/output_file.hpp"
#include "tpsim/io/output_lock.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/io/workload_kinds.hpp"
#include "tpsim/sweep/sweep_table.hpp"

namespace tpsim {

namespace {

namespace fs = std::filesystem;

std::string describe_point(const SweepSpec& spec, std::int64_t point) {
  std::vector<std::string> parts;
  const auto values = spec.values_of(point);
  for (std::size_t i = 0; i < spec.axes.size(); ++i) parts.push_back(fmt::format("{}={}", spec.axes[i].field, value_text(values[i])));
  const std::string where = spec.file.empty() ? "" : spec.file + ": ";
  return fmt::format("{}point {} ({})", where, point, fmt::join(parts, ", "));
}

std::string progress_tag(const std::string& sweep_id, const SweepOptions& o) {
  return fmt::format("tpsim sweep {} shard {}/{}\n", sweep_id, o.shard_index, o.shard_count);
}

// The sweep's points and the contents of every hardware file its points read (with
// their "base" chains), from the spec alone so that every shard agrees: a resumed
// sweep whose model file changed is another sweep.
std::string sweep_identity(const SweepSpec& spec) {
  std::set<std::string> hardware_refs;
  for (const SweepAxis& a : spec.axes)
    if (a.field == "hardware")
      for (const Json& v : a.values) hardware_refs.insert(value_text(v));
  if (hardware_refs.empty()) hardware_refs.insert(spec.base.value("hardware", ""));
  std::string text = spec.fingerprint;
  for (const std::string& ref : hardware_refs)
    text += "\n" + ref + "\n" + resolve_hardware_json(hardware_file_path(ref, "$.hardware", spec.base_dir)).dump();
  return fmt::format("{}/{}", fingerprint_of(text), spec.points());
}

// How many of the shard's points the CSV already holds whole, and the byte
// length of that prefix. Rows of one point are contiguous; the last point may
// be cut short by a kill, so a point counts only once the next one starts or,
// for the last, once it has all its rows.
std::pair<std::int64_t, std::uintmax_t> completed_prefix(const std::string& file, const std::string& header,
                                                          const std::vector<std::int64_t>& points, std::size_t rows_per_point) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.compare(0, header.size(), header) != 0)
    throw InputError(fmt::format("{}: its header is not this sweep's; remove it or choose another -o", file));
  std::size_t pos = header.size(), good_end = pos;
  std::int64_t done = 0;
  std::size_t rows = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a torn last line
    const std::string line = text.substr(pos, nl - pos);
    const std::int64_t point = std::strtoll(line.c_str(), nullptr, 10);
    if (done >= static_cast<std::int64_t>(points.size()) || point != points[static_cast<std::size_t>(done)]) break;
    pos = nl + 1;
    if (++rows == rows_per_point) rows = 0, ++done, good_end = pos;
  }
  return {done, good_end};
}

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, bool enabled, std::int64_t total)
      : out_(out), enabled_(enabled), total_(total), start_(std::chrono::steady_clock::now()) {}
  void update(std::int64_t done, std::int64_t resumed) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done - resumed) / secs : 0;
    const double left = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
    const int width = 30, filled = total_ ? static_cast<int>(width * done / total_) : width;
    out_ << fmt::format("\r[{}{}] {}/{} points, {:.0f}/s, {:.0f} s left ", std::string(filled, '#'),
                        std::string(width - filled, '.'), done, total_, rate, left)
         << (done == total_ ? "\n" : "") << std::flush;
  }

 private:
  std::ostream& out_;
  bool enabled_;
  std::int64_t total_;
  std::chrono::steady_clock::time_point start_, last_{};
};

}  // namespace

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& o, std::ostream& progress_out) {
  SweepSummary summary;
  std::vector<std::int64_t> points;
  for (std::int64_t p = o.shard_index; p < spec.points(); p += o.shard_count) points.push_back(p);
  summary.points = static_cast<std::int64_t>(points.size());

  // Every point must make a valid scenario before anything runs or is written.
  HardwareCache cache;
  const bool training = is_training_sweep(spec);
  std::size_t rows_per_point = 0;
  for (std::int64_t p : points) {
    try {
      const Scenario s = parse_scenario(spec.scenario_of(p), spec.base_dir, &cache);
      if (is_training_step(s.workload) != training)
        throw InputError("a sweep cannot mix training steps with other workloads (their results have different columns)");
      check_op_budget(s);
      if (rows_per_point == 0) rows_per_point = s.variants.size();
      if (s.variants.size() != rows_per_point) {
        // Defaults differ where a point leaves variants out (NVLink-only ones across nodes,
        // all but baseline without sequence parallelism): its notes say which.
        std::string why;
        for (const std::string& note : s.notes)
          if (note.starts_with("left out")) why = fmt::format(" ({})", note);
        throw InputError(fmt::format("its variant list ({}) differs in length from the first point's{}; list \"variants\" that every "
                                     "point runs, or sweep variants as lists of one length",
                                     fmt::join(s.variants, ", "), why));
      }
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", describe_point(spec, p), e.what()));
    } catch (const SimulationLimit& e) {
      throw InputError(fmt::format("{}: {}", describe_point(spec, p), e.what()));
    }
  }

  const std::string sweep_id = sweep_identity(spec);
  const std::string header = sweep_csv_header(spec);
  const std::string progress_file = o.output + ".progress";
  // "-" streams the rows to standard output: nothing to claim or resume.
  const bool to_stdout = o.output == "-";
  // Held to the end: a second sweep on this CSV is refused instead of interleaving rows.
  // The CSV is only ever truncated or appended to in place, so the claim stays on it.
  std::optional<OutputLock> claim;
  if (!to_stdout) claim.emplace(o.output);
  const bool fresh = to_stdout || fs::file_size(o.output) == 0;  // new (or left empty by a run killed at its start)
  std::int64_t done = 0;
  if (!fresh) {
    std::ifstream tag_in(progress_file);
    std::string tag((std::istreambuf_iterator<char>(tag_in)), std::istreambuf_iterator<char>());
    const auto [prefix, bytes] = completed_prefix(o.output, header, points, rows_per_point);
    if (!fs::exists(progress_file) && prefix != summary.points)
      throw InputError(fmt::format("{}: exists and is not an unfinished run of this sweep; remove it or choose another -o", o.output));
    if (fs::exists(progress_file) && tag != progress_tag(sweep_id, o))
      throw InputError(fmt::format("{}: belongs to another sweep or shard ({}); remove both to start again", progress_file, o.output));
    fs::resize_file(o.output, bytes);
    done = prefix;
    write_output_file(progress_file, progress_tag(sweep_id, o));
  } else if (!to_stdout) {
    // The marker first: a CSV without one would look like a finished run of another sweep.
    write_output_file(progress_file, progress_tag(sweep_id, o));
  }
  summary.resumed = done;

  AppendFile out(o.output);
  if (fresh) out.append(header, fmt::format("nothing yet; {} marks the run unfinished", progress_file));
  std::mutex mutex;
  std::condition_variable room;
  std::map<std::size_t, std::string> ready;  // finished out of order, waiting for earlier points
  std::size_t next = static_cast<std::size_t>(done), flushed = next;
  const unsigned jobs = o.jobs > 0 ? static_cast<unsigned>(o.jobs) : std::max(1u, std::thread::hardware_concurrency());
  const std::size_t window = 64 * jobs;  // bounds memory: workers never run far ahead of the file
  std::exception_ptr failure;
  ProgressBar bar(progress_out, o.progress, summary.points);
  std::int64_t written_this_run = 0;

  auto worker = [&] {
    while (true) {
      std::size_t i;
      {
        std::unique_lock<std::mutex> lock(mutex);
        room.wait(lock, [&] { return failure || next >= points.size() || next < flushed + window; });
        if (failure || next >= points.size()) return;
        i = next++;
      }
      std::string rows;
      try {
        const Scenario s = parse_scenario(spec.scenario_of(points[i]), spec.base_dir, &cache);
        rows = training ? sweep_step_csv_rows(spec, points[i], run_training_step(s), sweep_id)
                        : sweep_csv_rows(spec, points[i], run_scenario(s, false), sweep_id);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        failure = std::current_exception();
        room.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      ready.emplace(i, std::move(rows));
      while (!ready.empty() && ready.begin()->first == flushed) {
        try {
          out.append(ready.begin()->second, fmt::format("its first {} points are whole and kept with {}: rerun to resume",
                                                        flushed, progress_file));
        } catch (...) {
          failure = std::current_exception();
          room.notify_all();
          return;
        }
        ready.erase(ready.begin());
        ++flushed;
        ++written_this_run;
        if (o.kill_after > 0 && written_this_run >= o.kill_after) std::raise(SIGKILL);
      }
      bar.update(static_cast<std::int64_t>(flushed), summary.resumed);
      room.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < jobs; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);  // the progress marker stays: the CSV's whole points resume
  out.close();
  summary.simulated = static_cast<std::int64_t>(flushed) - summary.resumed;
  if (!to_stdout) fs::remove(progress_file);
  if (!o.markdown.empty()) write_markdown_from_csv(o.output, o.markdown);
  return summary;
}

void write_markdown_from_csv(const std::string& csv, const std::string& markdown) {
  std::ifstream in(csv, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file", csv));
  write_output_file(markdown, sweep_markdown(in));
}

void merge_sweep_csvs(const std::vector<std::string>& inputs, const std::string& output) {
  std::string header, sweep_id;
  std::map<std::int64_t, std::string> rows;  // point -> its lines
  for (const auto& file : inputs) {
    if (fs::exists(file + ".progress")) throw InputError(fmt::format("{}: this shard is unfinished (rerun it first)", file));
    std::istringstream in(read_input_file(file));
    std::string line, h;
    if (!std::getline(in, h) || h.empty()) throw InputError(fmt::format("{}: empty: not a tpsim sweep CSV", file));
    if (!h.ends_with(",sweep"))
      throw InputError(fmt::format("{}: no \"sweep\" column: not a CSV of this tpsim's sweep (rerun the shard)", file));
    if (header.empty()) header = h;
    if (h != header) throw InputError(fmt::format("{}: its columns differ from {}'s: not a shard of the same sweep", file, inputs.front()));
    std::map<std::int64_t, std::string> mine;
    while (std::getline(in, line)) {
      char* end = nullptr;
      const std::int64_t p = std::strtoll(line.c_str(), &end, 10);
      const std::size_t comma = line.rfind(',');
      if (end == line.c_str() || *end != ',' || p < 0 || comma == std::string::npos)
        throw InputError(fmt::format("{}: malformed row \"{}\"", file, line));
      const std::string id = line.substr(comma + 1);
      if (sweep_id.empty()) sweep_id = id;
      if (id != sweep_id)
        throw InputError(fmt::format("{}: point {} is of another sweep ({}) than the first row's ({}): a shard of another sweep, "
                                     "or of this one run with other model files", file, p, id, sweep_id));
      mine[p] += line + "\n";
    }
    for (auto& [p, text] : mine) {
      auto [it, fresh] = rows.emplace(p, text);
      if (!fresh && it->second != text) throw InputError(fmt::format("{}: point {} differs from another shard's", file, p));
    }
  }
  if (sweep_id.empty()) throw InputError("merge: the shards hold no rows");
  // The identity ends in the sweep's point count: every point 0..count-1 must be there, whole.
  const std::int64_t count = std::strtoll(sweep_id.substr(sweep_id.find('/') + 1).c_str(), nullptr, 10);
  std::int64_t missing = 0, first_missing = -1;
  for (std::int64_t p = 0; p < count; ++p)
    if (!rows.contains(p)) first_missing = first_missing < 0 ? p : first_missing, ++missing;
  if (missing > 0)
    throw InputError(fmt::format("merge: {} of the sweep's {} points are in no shard (the first is point {}): a shard is missing",
                                 missing, count, first_missing));
  if (!rows.empty() && rows.rbegin()->first >= count)
    throw InputError(fmt::format("merge: point {} is beyond the sweep's {} points", rows.rbegin()->first, count));
  // Every point has one row per variant: as many as point 0.
  const auto lines = [](const std::string& text) { return std::count(text.begin(), text.end(), '\n'); };
  for (const auto& [p, text] : rows)
    if (lines(text) != lines(rows.begin()->second))
      throw InputError(fmt::format("merge: point {} has {} rows, point 0 has {}", p, lines(text), lines(rows.begin()->second)));
  std::string merged = header + "\n";
  for (const auto& [p, text] : rows) merged += text;
  write_output_file(output, merged);
}

}  // namespace tpsim
