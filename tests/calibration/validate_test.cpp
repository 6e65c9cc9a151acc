// `tpsim validate` and the rule that whole decomposed ops, fused kernels and layers are
// predicted, never fitted.
#include "support/catch.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

#include "tpsim/calibration/calibrate.hpp"
#include "tpsim/calibration/validate.hpp"

using namespace tpsim;

namespace {

constexpr const char* kScenarioRow = R"({{"kind": "scenario", "variant": "{}", "time_us": {}, "source": "{}",
    "scenario": {{"gpus": 4, "dtype": "bf16", "workload": {{"op": "{}", "m": 8192, "k": 4096, "n": 4096}}}}}})";

std::string row(const std::string& variant, const std::string& op, double us, const std::string& source) {
  return fmt::format(fmt::runtime(kScenarioRow), variant, us, source, op);
}

// A measurement file in a fresh directory of its own (tests run in parallel), removed with it.
struct MeasurementFile {
  std::filesystem::path dir;
  std::string path;
  MeasurementFile(const std::string& tag, const std::vector<std::string>& rows)
      : dir(std::filesystem::temp_directory_path() / fmt::format("tpsim_validate_test_{}_{}", tag, ::getpid())) {
    std::filesystem::create_directories(dir);
    path = (dir / "m.json").string();
    std::ofstream(path) << R"({"format": "tpsim-measurements", "hardware": "h100_sxm", "measurements": [)"
                        << fmt::format("{}", fmt::join(rows, ", ")) << "]}";
  }
  ~MeasurementFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

const std::string kGemmA = R"({"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "tflops": 790, "source": "a"})";
const std::string kGemmB = R"({"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 770, "source": "b"})";

}  // namespace

TEST_CASE("Only op-level measurements may be fitted", "[calibration][validate]") {
  const MeasurementFile file("fittable", {kGemmA, row("baseline", "allgather_matmul", 300, "s"),
                                         row("async_tp", "allgather_matmul", 250, "s"), row("fused", "allgather_matmul", 240, "s")});
  const auto ms = load_measurements_file(file.path);
  REQUIRE(ms.size() == 4);
  CHECK(fittable(ms[0]));   // a GEMM
  CHECK(fittable(ms[1]));   // an NCCL collective and a GEMM in sequence
  CHECK_FALSE(fittable(ms[2]));  // a decomposed op
  CHECK_FALSE(fittable(ms[3]));  // a fused kernel
  // A copy timed beside a GEMM: the HBM it gets there has no parameter of its own yet.
  const MeasurementFile beside("beside", {R"({"kind": "peer_copy_with_gemm", "bytes": 4194304, "m": 128, "n": 6656, "k": 16384,
                                             "dtype": "bf16", "time_us": 40, "source": "t"})"});
  CHECK_FALSE(fittable(load_measurements_file(beside.path).front()));
}

TEST_CASE("calibrate predicts decomposed-op makespans with the held-out rows instead of fitting them", "[calibration][validate]") {
  const MeasurementFile file("calibrate", {kGemmA, kGemmB, row("async_tp", "allgather_matmul", 250, "s")});
  CalibrationRequest req;
  req.measurement_files = {file.path};
  req.hardware = "h100_sxm";
  req.name = "validate_test_model";
  req.fit.max_evaluations = 20;
  const Calibration c = calibrate(req);
  CHECK(c.measurements.size() == 2);
  CHECK(c.not_fitted == 1);
  REQUIRE(c.validation.size() == 1);
  CHECK(c.validation[0].kind == MeasurementKind::scenario);
  CHECK(c.validation_after_us.size() == 1);
}

TEST_CASE("validate predicts every row, and cross-validation holds each source out of the fit in turn", "[calibration][validate]") {
  const MeasurementFile file("cv", {kGemmA, kGemmB, row("async_tp", "allgather_matmul", 250, "s")});
  ValidationRequest req;
  req.files = {file.path};
  req.hardware = "h100_sxm";
  req.fit.max_evaluations = 20;
  const Validation plain = validate(req);
  REQUIRE(plain.predicted_us.size() == 3);
  CHECK(plain.held_out_us.empty());
  for (double p : plain.predicted_us) CHECK(p > 0);
  req.cross_validate = true;
  const Validation cv = validate(req);
  CHECK(cv.sources == std::vector<std::string>{"a", "b", "s"});
  REQUIRE(cv.held_out_us.size() == 3);
  for (double p : cv.held_out_us) CHECK(p > 0);
  // The scenario row is never fitted, so holding its source out changes nothing for it.
  CHECK(cv.held_out_us[2] != 0);
  const std::string text = format_validation(cv);
  CHECK(text.find("leave-one-source-out") != std::string::npos);
  CHECK(validation_json(cv)["rows"].size() == 3);
}

TEST_CASE("calibrate and validate refuse rows in a dtype the hardware lacks, and name rows from other hardware", "[calibration][validate]") {
  const MeasurementFile fp8("fp8", {R"({"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp8", "time_us": 100})", kGemmA});
  CalibrationRequest req;
  req.measurement_files = {fp8.path};
  req.hardware = "a100_sxm";  // Ampere has no fp8 tensor cores
  req.fit.max_evaluations = 5;
  CHECK_THROWS_WITH(calibrate(req), Catch::Contains("$.measurements[0]: hardware a100_sxm has no fp8 math"));
  ValidationRequest v;
  v.files = {fp8.path};
  v.hardware = "a100_sxm";
  CHECK_THROWS_WITH(validate(v), Catch::Contains("has no fp8 math"));
  // The file says h100_sxm: fitting a100_sxm to it is allowed, but said.
  const MeasurementFile bf16("other", {kGemmA, kGemmB});
  req.measurement_files = {bf16.path};
  const Calibration c = calibrate(req);
  REQUIRE(c.notes.size() == 1);
  CHECK(c.notes[0] == "some measurements say they were taken on h100_sxm, not a100_sxm: fitting a100_sxm to them");
  req.hardware = "h100_sxm";
  CHECK(calibrate(req).notes.empty());
}

TEST_CASE("validate says whether each variant's win or loss against its baseline comes out right", "[calibration][validate]") {
  // The same scenario measured with two variants: async TP measured slower than the baseline.
  const MeasurementFile file("verdicts", {row("baseline", "allgather_matmul", 300, "s"), row("async_tp", "allgather_matmul", 400, "s"),
                                          row("fused", "allgather_matmul", 200, "s"), kGemmA});
  ValidationRequest req;
  req.files = {file.path};
  req.hardware = "h100_sxm";
  const Validation v = validate(req);
  const auto verdicts = speedup_verdicts(v.measurements, v.predicted_us);
  REQUIRE(verdicts.size() == 2);  // the GEMM row has no baseline; the baseline is not its own verdict
  CHECK(verdicts[0].variant == "async_tp");
  CHECK(verdicts[0].measured == Approx(0.75));
  CHECK(verdicts[0].predicted == Approx(v.predicted_us[0] / v.predicted_us[1]));
  CHECK(verdicts[1].measured == Approx(1.5));
  // Agreement is about the side of 1, not the size of the error.
  CHECK(SpeedupVerdict{"s", "v", 1.5, 1.01}.agrees());
  CHECK_FALSE(SpeedupVerdict{"s", "v", 0.99, 1.01}.agrees());
  CHECK(SpeedupVerdict{"s", "v", 0.5, 0.9}.agrees());
  const std::string text = format_validation(v);
  CHECK(text.find("verdicts: ") != std::string::npos);
  CHECK(text.find(" of 2 agree") != std::string::npos);
  CHECK(validation_json(v)["speedups"].size() == 2);
  // A variant without its baseline measured gets no verdict.
  const MeasurementFile alone("alone", {row("async_tp", "allgather_matmul", 250, "s")});
  req.files = {alone.path};
  const Validation w = validate(req);
  CHECK(speedup_verdicts(w.measurements, w.predicted_us).empty());
  CHECK(format_validation(w).find("verdicts") == std::string::npos);
}

TEST_CASE("validate sums up per file and class when several files are checked", "[calibration][validate]") {
  const MeasurementFile gemms("files_a", {kGemmA, kGemmB});
  const MeasurementFile scenarios("files_b", {row("baseline", "allgather_matmul", 400, "s"), row("async_tp", "allgather_matmul", 250, "s")});
  ValidationRequest req;
  req.files = {gemms.path, scenarios.path};
  req.hardware = "h100_sxm";
  const Validation v = validate(req);
  REQUIRE(v.files.size() == 4);
  CHECK(v.files[0] == "m.json");
  const auto by_file = errors_by_file(v, v.predicted_us);
  // Both files are named m.json in their own directories: one key per file name and class.
  REQUIRE(by_file.size() == 2);
  CHECK(by_file.at({"m.json", "gemm"}).n == 2);
  CHECK(by_file.at({"m.json", "scenario"}).n == 2);
  // The per-file means are the per-row errors averaged: nothing lost, nothing counted twice.
  double sum = 0;
  for (std::size_t i = 0; i < 2; ++i) sum += std::fabs(v.predicted_us[i] / v.measurements[i].time_us - 1);
  CHECK(by_file.at({"m.json", "gemm"}).mean() == Approx(sum / 2));
  CHECK(format_validation(v).find("file ") != std::string::npos);
  CHECK(validation_json(v)["rows"][3]["file"] == "m.json");
}

TEST_CASE("validate says how each row was timed, and a burst row on a model with no ceiling speed comes with a note", "[calibration][validate][power]") {
  const std::string burst = R"({"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "tflops": 790, "clock": "burst", "source": "c"})";
  const MeasurementFile file("clock", {kGemmA, burst});
  ValidationRequest req;
  req.files = {file.path};
  req.hardware = "h100_sxm";
  const Validation v = validate(req);
  CHECK(v.notes.empty());
  const Json rows = validation_json(v)["rows"];
  CHECK(rows[0]["clock"] == "sustained");
  CHECK(rows[1]["clock"] == "burst");
  // The same GEMM and rate: timed in a burst, the model expects it sooner.
  CHECK(v.predicted_us[1] < v.predicted_us[0] / 1.1);
  req.hardware = "b200";  // no power section
  const Validation b = validate(req);
  REQUIRE(b.notes.size() == 1);
  CHECK_THAT(b.notes[0], Catch::Matchers::Contains("1 row(s) were timed in bursts and hardware b200 gives no power.burst_speed"));
  CHECK(b.predicted_us[1] == Approx(b.predicted_us[0]));
}
