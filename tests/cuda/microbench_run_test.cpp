// `tpsim microbench` keeps every row on disk as it is measured and resumes an unfinished
// run, checked on the CPU with a stand-in for the GPUs.
#include "support/catch.hpp"

#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <unistd.h>

#include "tpsim/calibration/microbench_plan.hpp"
#include "tpsim/cuda/gpu_executor.hpp"
#include "tpsim/cuda/microbench_run.hpp"
#include "tpsim/io/input_error.hpp"

using namespace tpsim;

namespace {

struct Scratch {
  std::filesystem::path dir;
  explicit Scratch(const char* tag)
      : dir(std::filesystem::temp_directory_path() / fmt::format("tpsim_microbench_{}_{}", tag, ::getpid())) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  MicrobenchFiles files(const std::string& source = "tpsim microbench on 1 x test GPU, median of 10 repeats") const {
    return {(dir / "micro.json").string(), source, "tpsim microbench on 1 x test GPU"};
  }
};

// A GPU that takes (row index + 1) microseconds for every row, and counts what it measured.
struct FakeGpu {
  explicit FakeGpu(const std::vector<Measurement>& p) : plan(p) {}
  const std::vector<Measurement>& plan;
  std::vector<std::string> measured{};
  std::string fail_on{};  // this row throws GpuError
  std::string stop_on{};  // this row ends the process (any other exception)
  std::string absent{};   // this machine has nothing to run for this row
  std::optional<Measurement> operator()(const Measurement& row) {
    if (row.name == fail_on) throw GpuError("cuBLASLt has no algorithm");
    if (row.name == absent) return std::nullopt;
    if (row.name == stop_on) throw std::runtime_error("killed");
    measured.push_back(row.name);
    Measurement m = row;
    for (std::size_t i = 0; i < plan.size(); ++i)
      if (plan[i].name == row.name) m.time_us = static_cast<double>(i + 1);
    return m;
  }
};

std::vector<Measurement> one_gpu_plan() {
  std::vector<Measurement> plan = microbench_measurements(1, Dtype::bf16);
  plan.resize(6);
  return plan;
}

// A run of `plan` into `s` stopped (its process killed) when it reached row `at`.
void run_stopped_at(const Scratch& s, const std::vector<Measurement>& plan, std::size_t at) {
  FakeGpu gpu(plan);
  gpu.stop_on = plan[at].name;
  std::ostringstream log;
  CHECK_THROWS_AS(run_microbench(plan, s.files(), std::ref(gpu), log), std::runtime_error);
}

}  // namespace

TEST_CASE("A microbench writes every row it measured and leaves no progress marker when it ends", "[cuda][microbench]") {
  const Scratch s("whole");
  const auto plan = one_gpu_plan();
  FakeGpu gpu(plan);
  std::ostringstream log;
  const MicrobenchOutcome out = run_microbench(plan, s.files(), std::ref(gpu), log);
  CHECK(out.measured == 6);
  CHECK(out.resumed == 0);
  CHECK(out.failed.empty());
  CHECK_FALSE(std::filesystem::exists(progress_marker(s.files().output)));
  const auto rows = load_measurements_file(s.files().output);
  REQUIRE(rows.size() == 6);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].name == plan[i].name);
    CHECK(rows[i].time_us == Approx(static_cast<double>(i + 1)));
    CHECK(rows[i].source == s.files().source);
  }
}

TEST_CASE("A row the GPUs cannot run is left out and retried by the same command, which measures nothing else again",
          "[cuda][microbench]") {
  const Scratch s("failed");
  const auto plan = one_gpu_plan();
  FakeGpu first(plan);
  first.fail_on = plan[2].name;
  std::ostringstream log;
  const MicrobenchOutcome a = run_microbench(plan, s.files(), std::ref(first), log);
  CHECK(a.measured == 5);
  REQUIRE(a.failed.size() == 1);
  CHECK(a.failed[0].find(plan[2].name) == 0);
  CHECK(log.str().find("failed: cuBLASLt has no algorithm") != std::string::npos);
  CHECK(std::filesystem::exists(progress_marker(s.files().output)));
  CHECK(load_measurements_file(s.files().output).size() == 5);

  run_stopped_at(s, plan, 2);  // a resumed run stopped at its first row loses none of the kept rows
  CHECK(load_measurements_file(s.files().output).size() == 5);

  FakeGpu second(plan);
  const MicrobenchOutcome b = run_microbench(plan, s.files(), std::ref(second), log);
  CHECK(second.measured == std::vector<std::string>{plan[2].name});
  CHECK(b.resumed == 5);
  CHECK_FALSE(std::filesystem::exists(progress_marker(s.files().output)));
  const auto rows = load_measurements_file(s.files().output);
  REQUIRE(rows.size() == 6);
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(rows[i].name == plan[i].name);  // the plan's order
}

TEST_CASE("A microbench stopped part way keeps the rows measured before the stop, and resumes after them", "[cuda][microbench]") {
  const Scratch s("stopped");
  const auto plan = one_gpu_plan();
  run_stopped_at(s, plan, 3);
  CHECK(load_measurements_file(s.files().output).size() == 3);
  CHECK(std::filesystem::exists(progress_marker(s.files().output)));

  FakeGpu second(plan);
  std::ostringstream log;
  const MicrobenchOutcome b = run_microbench(plan, s.files(), std::ref(second), log);
  CHECK(b.resumed == 3);
  CHECK(second.measured == std::vector<std::string>{plan[3].name, plan[4].name, plan[5].name});
  CHECK(load_measurements_file(s.files().output).size() == 6);
}

TEST_CASE("An unfinished microbench is not resumed by another machine or plan, and a finished one is measured afresh",
          "[cuda][microbench]") {
  const Scratch s("refused");
  const auto plan = one_gpu_plan();
  run_stopped_at(s, plan, 3);

  FakeGpu other(plan);
  std::ostringstream log;
  const MicrobenchFiles elsewhere = s.files("tpsim microbench on 1 x another GPU, median of 10 repeats");
  CHECK_THROWS_WITH(run_microbench(plan, elsewhere, std::ref(other), log),
                    Catch::Contains("was measured as") && Catch::Contains("micro.json.progress"));
  auto shorter = plan;
  shorter.erase(shorter.begin());
  CHECK_THROWS_WITH(run_microbench(shorter, s.files(), std::ref(other), log), Catch::Contains("does not plan"));
  CHECK(other.measured.empty());

  FakeGpu resume(plan);
  run_microbench(plan, s.files(), std::ref(resume), log);
  FakeGpu again(plan);
  const MicrobenchOutcome fresh = run_microbench(plan, s.files(), std::ref(again), log);
  CHECK(fresh.resumed == 0);
  CHECK(again.measured.size() == 6);
}

TEST_CASE("A row this machine has nothing to run for is left out without failing the run", "[cuda][microbench]") {
  const Scratch s("absent");
  const auto plan = one_gpu_plan();
  FakeGpu gpu(plan);
  gpu.absent = plan[1].name;
  std::ostringstream log;
  const MicrobenchOutcome out = run_microbench(plan, s.files(), std::ref(gpu), log);
  CHECK(out.measured == 5);
  CHECK(out.not_offered == 1);
  CHECK(out.failed.empty());
  CHECK(log.str().find(plan[1].name + std::string(" ")) != std::string::npos);
  CHECK(log.str().find("not offered here") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(progress_marker(s.files().output)));
  CHECK(load_measurements_file(s.files().output).size() == 5);
}

TEST_CASE("Every microbench row has a name of its own, by which a resumed run finds it", "[cuda][microbench]") {
  for (int gpus : {1, 2, 8}) {
    std::set<std::string> names;
    for (const Measurement& m : microbench_measurements(gpus, Dtype::bf16)) CHECK(names.insert(m.name).second);
  }
  const Scratch s("twins");
  auto plan = one_gpu_plan();
  plan.push_back(plan.front());
  FakeGpu gpu(plan);
  std::ostringstream log;
  CHECK_THROWS_AS(run_microbench(plan, s.files(), std::ref(gpu), log), std::logic_error);
  CHECK(gpu.measured.empty());
}

TEST_CASE("A microbench of some rows leaves the rest waiting, and the same output's next run measures only those", "[cuda][microbench]") {
  const Scratch s("only");
  const auto plan = one_gpu_plan();
  const auto first_two = [&](const Measurement& m) { return m.name == plan[0].name || m.name == plan[1].name; };
  FakeGpu some(plan);
  std::ostringstream log;
  const MicrobenchOutcome a = run_microbench(plan, s.files(), std::ref(some), log, first_two);
  CHECK(some.measured == std::vector<std::string>{plan[0].name, plan[1].name});
  CHECK(a.waiting == 4);
  CHECK(std::filesystem::exists(progress_marker(s.files().output)));  // not whole yet
  CHECK(load_measurements_file(s.files().output).size() == 2);

  FakeGpu rest(plan);
  const MicrobenchOutcome b = run_microbench(plan, s.files(), std::ref(rest), log);
  CHECK(rest.measured.size() == 4);
  CHECK(b.resumed == 2);
  CHECK(b.waiting == 0);
  CHECK_FALSE(std::filesystem::exists(progress_marker(s.files().output)));
  CHECK(load_measurements_file(s.files().output).size() == 6);
}
