// Measurement files, Kineto traces and tpsim results read as measurements;
// every bad input is one InputError naming the JSON path.
#include "support/catch.hpp"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "support/measurement_rows.hpp"
#include "support/simulate.hpp"
#include "tpsim/calibration/measurement.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/result_import.hpp"
#include "tpsim/report/result_writers.hpp"

using namespace tpsim;

namespace {

using test::error_of;
using test::parse;

const Measurement& named(const std::vector<Measurement>& ms, const std::string& name) {
  for (const auto& m : ms)
    if (m.name == name) return m;
  throw std::logic_error("no measurement " + name);
}

}  // namespace

TEST_CASE("Rates become times: TFLOP/s for GEMMs, GB/s for copies, bus bandwidth for collectives", "[measurement]") {
  const auto ms = parse(R"([
      {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "tflops": 800},
      {"kind": "peer_copy", "bytes": 1e9, "gbps": 400},
      {"kind": "reduce_scatter", "gpus": 8, "bytes": 8e9, "busbw_gbps": 350}])");
  REQUIRE(ms.size() == 3);
  CHECK(ms[0].time_us == Approx(2.0 * 8192 * 8192 * 8192 / 800e12 * 1e6));
  CHECK(ms[1].time_us == Approx(2500));
  CHECK(ms[2].time_us == Approx(8e9 * 7 / 8 / 350e9 * 1e6));
  CHECK(measurement_class(ms[2].kind) == "collective");
}

TEST_CASE("Bad measurement files get one line naming the JSON path", "[measurement]") {
  CHECK(error_of(R"([{"kind": "gemmm", "m": 1, "n": 1, "k": 1, "dtype": "bf16", "time_us": 1}])") ==
        R"($.measurements[0].kind: unknown kind "gemmm" (did you mean "gemm"?))");
  CHECK(error_of(R"([{"kind": "gemm", "m": 1, "n": 1, "k": 1, "dtype": "bf16", "time_us": 1, "tflops": 3}])") ==
        "$.measurements[0]: give exactly one measured value (time_us or tflops), got 2");
  CHECK(error_of(R"([{"kind": "peer_copy", "bytes": 10, "gpus": 2, "time_us": 1}])").starts_with(
      R"($.measurements[0]: unknown key "gpus")"));
  CHECK(error_of(R"([{"kind": "barrier", "gpus": 1, "time_us": 1}])") == "$.measurements[0].gpus: must be between 2 and 64");
  CHECK(error_of(R"([{"kind": "launch", "time_us": -3}])") == "$.measurements[0].time_us: must be a positive number, got -3");
  CHECK(error_of(R"([{"kind": "gemm", "m": 1e13, "n": 1, "k": 1, "dtype": "bf16", "time_us": 1}])").starts_with(
      "$.measurements[0].m: 10000000000000 is larger than the limit"));
  CHECK(error_of(R"([{"kind": "scenario", "variant": "baseline", "time_us": 1,
      "scenario": {"gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 0, "k": 1, "n": 1}}}])") ==
        "$.measurements[0].scenario.workload.m: must be a positive integer, got 0");
  CHECK(error_of(R"([{"kind": "scenario", "variant": "baseline", "time_us": 1,
      "scenario": {"gpus": 64, "dtype": "bf16", "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 4096,
                   "local_batch": 1, "mesh": {"fsdp": 8, "tp": 8}}}}])")
            .starts_with("$.measurements[0].scenario.workload.op: a training step is not a measurement row"));
  CHECK(error_of(R"([{"kind": "scenario", "variant": "fusedd", "time_us": 1,
      "scenario": {"gpus": 8, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 8, "k": 1, "n": 1}}}])") ==
        R"($.measurements[0].variant: variant "fusedd" does not apply)");
  CHECK(error_of("{}") == "$.measurements: must be an array, got object");
  CHECK(error_of(R"([{"kind": "gemm", "m": 65536, "n": 8, "k": 65536, "batch": 64, "dtype": "bf16", "time_us": 1}])") ==
        "$.measurements[0]: a 64 x 65536 x 65536 operand (2.75e+11 elements) is larger than any GPU memory holds (limit 2^36 elements)");
  CHECK(error_of(R"([{"kind": "peer_copy", "bytes": 10, "batch": 2, "time_us": 1}])").starts_with(
      R"($.measurements[0]: unknown key "batch")"));
  // Times no GPU op takes, given directly or through a rate.
  CHECK(error_of(R"([{"kind": "launch", "time_us": 1e-300}])") ==
        "$.measurements[0]: the measured time is 1e-300 us, outside 0.001 us to 1000 s: a typo or the wrong unit?");
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "bf16", "tflops": 1e6}])").starts_with(
      "$.measurements[0]: the measured time is"));
  CHECK(error_of(R"([{"kind": "launch", "time_us": 2e9}])").find("outside 0.001 us to 1000 s") != std::string::npos);
  CHECK(parse(R"([{"kind": "launch", "time_us": 0.001}])").front().hardware == "h100_sxm");
}

TEST_CASE("A batched GEMM row counts every product's FLOPs and keeps its batch through a round trip", "[measurement]") {
  const auto ms = parse(R"([{"kind": "gemm", "m": 256, "n": 512, "k": 1024, "batch": 4, "dtype": "bf16", "tflops": 100}])");
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].gemm.batch == 4);
  CHECK(ms[0].time_us == Approx(4 * 2.0 * 256 * 512 * 1024 / 100e12 * 1e6));
  CHECK(ms[0].name == "gemm 256x512x1024 bf16 batch 4");
  CHECK(measurement_json(ms[0])["batch"] == 4);
  CHECK(!measurement_json(parse(R"([{"kind": "gemm", "m": 1, "n": 1, "k": 1, "dtype": "bf16", "time_us": 1}])")[0]).contains("batch"));
  // torch._grouped_mm's groups: kept through a round trip, and only with groups to run.
  const auto grouped = parse(R"([{"kind": "gemm", "m": 256, "n": 512, "k": 1024, "batch": 4, "grouped": true, "dtype": "bf16", "time_us": 9}])");
  CHECK(grouped[0].gemm.grouped);
  CHECK(measurement_json(grouped[0])["grouped"] == true);
  CHECK(!measurement_json(ms[0]).contains("grouped"));
  CHECK(error_of(R"([{"kind": "gemm", "m": 8, "n": 8, "k": 8, "grouped": true, "dtype": "bf16", "time_us": 1}])") ==
        R"($.measurements[0].grouped: a grouped GEMM needs a "batch" of at least 2 groups)");
}

TEST_CASE("A grouped GEMM row over unequal groups gives their sizes, checked against its batch and mean", "[measurement]") {
  // Skewed experts: one at 3,072 rows, three at 1,024; m is their mean.
  const auto ms = parse(R"([{"kind": "gemm", "m": 1536, "n": 1408, "k": 2048, "batch": 4, "grouped": true, "dtype": "bf16",
                             "group_sizes": [3072, 1024, 1024, 1024], "tflops": 500},
                            {"kind": "gemm", "m": 1408, "n": 2048, "k": 1536, "batch": 4, "grouped": true, "dtype": "bf16",
                             "group_sizes": [3072, 1024, 1024, 1024], "ragged": "k", "time_us": 50}])");
  REQUIRE(ms.size() == 2);
  CHECK(ms[0].gemm.ragged());
  CHECK(ms[0].time_us == Approx(2.0 * 6144 * 1408 * 2048 / 500e12 * 1e6));
  CHECK(ms[1].gemm.ragged_k);
  CHECK(measurement_json(ms[0])["group_sizes"].size() == 4);
  CHECK(measurement_json(ms[1])["ragged"] == "k");
  CHECK(!measurement_json(ms[0]).contains("ragged"));
  const auto row = [](const std::string& extra) {
    return R"([{"kind": "gemm", "m": 1536, "n": 1408, "k": 2048, "batch": 4, "dtype": "bf16", "time_us": 9)" + extra + "}]";
  };
  CHECK(error_of(row(R"(, "group_sizes": [3072, 1024, 1024, 1024])")) ==
        R"($.measurements[0].group_sizes: only a "grouped" GEMM has groups of unequal size)");
  CHECK(error_of(row(R"(, "grouped": true, "group_sizes": [3072, 1024, 1024])")) ==
        R"($.measurements[0].group_sizes: must be an array of 4 sizes (one per group of "batch"))");
  CHECK(error_of(row(R"(, "grouped": true, "group_sizes": [3072, 1024, 0, 1024])")) ==
        "$.measurements[0].group_sizes[2]: must be a whole number from 1 to 16777216, got 0");
  CHECK(error_of(row(R"(, "grouped": true, "group_sizes": [4096, 1024, 1024, 1024])")) ==
        "$.measurements[0].m: must be the groups' mean size rounded down, 1792");
  CHECK(error_of(row(R"(, "grouped": true, "group_sizes": [3072, 1024, 1024, 1024], "ragged": "n")")) ==
        R"($.measurements[0].ragged: must be "m" or "k", got "n")");
  CHECK(error_of(row(R"(, "grouped": true, "ragged": "k")")) == R"($.measurements[0].ragged: needs "group_sizes")");
}

TEST_CASE("A row timed by CUDA events holds the repeat gap after its start event, a kernel-timed one does not", "[measurement]") {
  const auto ms = parse(R"([{"kind": "local_copy", "bytes": 1048576, "time_us": 5, "name": "kernel"},
                            {"kind": "local_copy", "bytes": 1048576, "time_us": 5, "name": "events", "timing": "events"},
                            {"kind": "gemm_pair", "m": 128, "n": 4096, "k": 4096, "dtype": "bf16", "time_us": 50, "timing": "events", "name": "pair"}])");
  const Measurement& kernel = named(ms, "kernel");
  const Measurement& events = named(ms, "events");
  CHECK(kernel.timing == MeasurementTiming::kernel);
  CHECK(events.timing == MeasurementTiming::events);
  // The benchmark's loop launches the op again right after itself: the repeat gap, shorter than
  // the one between two different kernels.
  const double gap = to_us(test::h100().launch.repeat_latency);
  REQUIRE(gap > 0);
  REQUIRE(gap < to_us(test::h100().launch.device_latency));
  CHECK(predict_us(events, test::h100()) - predict_us(kernel, test::h100()) == Approx(gap));
  // Two streams' kernels bracketed by events: the span still holds one gap, at its start.
  Measurement pair_kernel = named(ms, "pair");
  pair_kernel.timing = MeasurementTiming::kernel;
  CHECK(predict_us(named(ms, "pair"), test::h100()) - predict_us(pair_kernel, test::h100()) == Approx(gap));
  // Through a round trip; kernel time, the default, is not written.
  CHECK(parse("[" + measurement_json(events).dump() + "]").front().timing == MeasurementTiming::events);
  CHECK(!measurement_json(kernel).contains("timing"));
  CHECK(error_of(R"([{"kind": "local_copy", "bytes": 8, "time_us": 1, "timing": "cupti"}])") ==
        R"($.measurements[0].timing: unknown timing "cupti" (kernel or events))");
  // A launch row runs from the host's call, a scenario row is a makespan: neither takes it.
  CHECK(error_of(R"([{"kind": "launch", "time_us": 5, "timing": "events"}])").starts_with(R"($.measurements[0]: unknown key "timing")"));
}

TEST_CASE("Every shipped measurement file loads and every row names its source", "[measurement]") {
  const auto ms = load_measurements_file(models_dir() + "/measurements/h100_sxm_published.json");
  CHECK(ms.size() >= 20);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir() + "/measurements")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    for (const auto& m : load_measurements_file(entry.path().string())) {
      INFO(entry.path().filename().string() << ": " << m.name);
      CHECK(!m.source.empty());
    }
  }
  CHECK(files >= 5);
}

TEST_CASE("A tpsim result imports as scenario measurements that the same model predicts exactly", "[measurement]") {
  const RunResult r = test::simulate(R"({"name": "t", "hardware": "h100_sxm", "gpus": 4, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 4096, "k": 4096, "n": 4096}, "variants": ["baseline", "async_tp"]})");
  const auto ms = import_result_json(result_json(r), "r.json");
  REQUIRE(ms.size() == 2);
  for (std::size_t i = 0; i < ms.size(); ++i) {
    CHECK(ms[i].kind == MeasurementKind::scenario);
    CHECK(predict_us(ms[i], test::h100()) == Approx(test::makespan_us(r, r.runs[i].variant)).epsilon(1e-6));
  }
}

TEST_CASE("Measurement DAGs behave physically", "[measurement]") {
  auto us = [](const std::string& j) { return predict_us(parse("[" + j + "]").front(), test::h100()); };
  // A large copy's time is proportional to its bytes.
  const double c1 = us(R"({"kind": "peer_copy", "bytes": 1e9, "time_us": 1})");
  const double c2 = us(R"({"kind": "peer_copy", "bytes": 2e9, "time_us": 1})");
  CHECK(c2 / c1 == Approx(2).epsilon(0.01));
  // A GEMM next to an NCCL collective loses the SMs the collective holds; next to copy-engine copies it does not
  // lose SMs (only HBM bandwidth, which a compute-bound GEMM barely needs).
  const std::string gemm = R"("m": 4224, "n": 4096, "k": 8192, "dtype": "bf16")";
  const double alone = us(R"({"kind": "gemm", )" + gemm + R"(, "time_us": 1})");
  const double with_nccl = us(R"({"kind": "gemm_with_collective", "collective": "all_gather", "gpus": 8, "bytes": 1e9, )" + gemm +
                              R"(, "time_us": 1})");
  const double with_ce = us(R"({"kind": "gemm_with_peer_copy", "bytes": 1e9, )" + gemm + R"(, "time_us": 1})");
  CHECK(with_nccl > 1.2 * alone);
  CHECK(with_ce >= alone);
  CHECK(with_ce < 1.1 * alone);
  // The same pair timed the other way: a copy beside a GEMM takes no less than alone, and a
  // weight-streaming GEMM gives up to a copy beside it the HBM bandwidth the copy moves.
  const std::string thin = R"("m": 128, "n": 6656, "k": 16384, "dtype": "bf16")";
  const double copy_alone = us(R"({"kind": "peer_copy", "bytes": 16777216, "time_us": 1})");
  const double copy_beside = us(R"({"kind": "peer_copy_with_gemm", "bytes": 16777216, )" + thin + R"(, "time_us": 1})");
  CHECK(copy_beside >= copy_alone * (1 - 1e-9));
  const double thin_alone = us(R"({"kind": "gemm", )" + thin + R"(, "time_us": 1})");
  const double thin_with_ce = us(R"({"kind": "gemm_with_peer_copy", "bytes": 16777216, )" + thin + R"(, "time_us": 1})");
  CHECK(thin_with_ce > 1.05 * thin_alone);
  // Launch: host overhead + the repeat latency (the loop's tiny kernel follows itself) + the kernel.
  const double launch = us(R"({"kind": "launch", "time_us": 1})");
  CHECK(launch > to_us(test::h100().launch.host_overhead + test::h100().launch.repeat_latency));
}

TEST_CASE("A measured result's per-op times import as op measurements the same model predicts exactly", "[measurement]") {
  const RunResult r = test::simulate(R"({"name": "t", "hardware": "h100_sxm", "gpus": 4, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 4096, "k": 4096, "n": 4096}, "variants": ["async_tp"]})");
  Json j = result_json(r);
  j["results"][0]["op_times"] = op_times_json(r.runs[0]);
  const auto ms = import_result_json(j, "measured.json");
  REQUIRE(ms.size() > 10);  // the makespan, then every timed op
  CHECK(ms[0].op.empty());
  const auto predicted = predict_all_us(ms, test::h100());
  double weights = 0;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    INFO(ms[i].name);
    CHECK(predicted[i] == Approx(ms[i].time_us).margin(2e-3));  // times are written to the nanosecond
    if (i > 0) weights += ms[i].weight;
  }
  CHECK(weights == Approx(1));  // the ops of a run together weigh as much as its makespan
  j["results"][0]["op_times"][3]["op"] = "no_such_op";
  CHECK_THROWS_WITH(import_result_json(j, "measured.json"),
                    R"($.results[0].op_times[3].op: variant "async_tp" has no op "no_such_op" on rank 0)");
}

TEST_CASE("A scenario measurement may name one op of its run", "[measurement]") {
  const std::string scenario = R"("scenario": {"gpus": 2, "dtype": "bf16", "workload": {"op": "allgather_matmul", "m": 2048, "k": 1024, "n": 1024}})";
  const auto ms = parse(R"([{"kind": "scenario", "variant": "baseline", "op": "ag_mm.all_gather", "rank": 1, "time_us": 10, )" + scenario + "}]");
  CHECK(ms[0].op_rank == 1);
  CHECK(predict_us(ms[0], test::h100()) > 0);
  CHECK(error_of(R"([{"kind": "scenario", "variant": "baseline", "op": "ag_mm.all_gatherr", "time_us": 10, )" + scenario + "}]") ==
        R"($.measurements[0].op: variant "baseline" has no op "ag_mm.all_gatherr" on rank 0)");
  CHECK(error_of(R"([{"kind": "scenario", "variant": "baseline", "rank": 1, "time_us": 10, )" + scenario + "}]") ==
        R"($.measurements[0].rank: only with "op" (the makespan is over every rank))");
}

TEST_CASE("Collective rows may run in several groups at once: each group its own consecutive GPUs, group 0 timed", "[measurement]") {
  const auto ms = parse(R"([
      {"kind": "all_gather", "gpus": 4, "bytes": 268435456, "time_us": 600},
      {"kind": "all_gather", "gpus": 4, "groups": 2, "bytes": 268435456, "time_us": 600},
      {"kind": "barrier", "gpus": 2, "groups": 4, "time_us": 6}])");
  REQUIRE(ms.size() == 3);
  CHECK(ms[1].groups == 2);
  CHECK(ms[1].name == "all_gather 268435456 B x4 (2 groups at once)");
  CHECK(measurement_json(ms[1])["groups"] == 2);
  CHECK_FALSE(measurement_json(ms[0]).contains("groups"));
  // The row's bus bandwidth is one group's: the buffer and GPU count are per group.
  CHECK(parse(R"([{"kind": "all_gather", "gpus": 4, "groups": 2, "bytes": 4e9, "busbw_gbps": 300}])")[0].time_us ==
        Approx(4e9 * 3 / 4 / 300e9 * 1e6));

  const MeasurementDag md = measurement_dag(ms[2]);
  CHECK(md.dag.ranks() == 8);
  CHECK(md.dag.process_groups() == 5);  // the world and four pairs
  for (int group = 0; group < md.dag.groups(); ++group) {
    const ProcessGroup& pg = md.dag.process_group_of(group);
    REQUIRE(pg.size() == 2);
    CHECK(pg.rank(1) == pg.rank(0) + 1);
    CHECK(pg.rank(0) % 2 == 0);
  }
  CHECK(md.dag.op(md.target).rank == 0);

  // Two halves of an NVSwitch node share no GPU and no link: each gathers as fast as one alone.
  CHECK(predict_us(ms[1], test::h100()) == Approx(predict_us(ms[0], test::h100())).epsilon(1e-9));
}

TEST_CASE("Groups of a collective row are bounded by the GPUs a row may name", "[measurement]") {
  CHECK(error_of(R"([{"kind": "all_gather", "gpus": 8, "groups": 9, "bytes": 1e6, "time_us": 10}])") ==
        "$.measurements[0].groups: 9 groups of 8 GPUs are more than 64 GPUs");
  CHECK(error_of(R"([{"kind": "all_gather", "gpus": 8, "groups": 0, "bytes": 1e6, "time_us": 10}])") ==
        "$.measurements[0].groups: must be a positive integer, got 0");
  CHECK(error_of(R"([{"kind": "peer_copy", "groups": 2, "bytes": 1e6, "time_us": 10}])").starts_with(
      R"($.measurements[0]: unknown key "groups")"));
}

TEST_CASE("A reduction row names its partials, bytes and kernel, and its GB/s count every partial read and the sum written", "[measurement]") {
  const auto ms = parse(R"([{"kind": "reduction", "partials": 8, "bytes": 1e9, "reduction": "aten_sum", "gbps": 900},
                            {"kind": "reduction", "partials": 4, "bytes": 1e6, "reduction": "triton", "time_us": 5}])");
  REQUIRE(ms.size() == 2);
  CHECK(ms[0].partials == 8);
  CHECK(ms[0].reduction == ReductionKernel::aten_sum);
  CHECK(ms[0].time_us == Approx(9e9 / 900e9 * 1e6));  // 8 partials read and 1 sum written
  CHECK(ms[1].reduction == ReductionKernel::triton);
  CHECK(ms[0].name == "reduction aten_sum of 8 x 1000000000 B");
  // It round-trips through a measurement file.
  const Json j = measurement_json(ms[0]);
  CHECK(j["partials"] == 8);
  CHECK(j["reduction"] == "aten_sum");
  const auto error = [](const std::string& row) {
    try {
      parse("[" + row + "]");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error(R"({"kind": "reduction", "partials": 1, "bytes": 1e6, "reduction": "aten_sum", "time_us": 5})"),
             Catch::Matchers::Contains("$.measurements[0].partials: must be between 2 and 64"));
  CHECK_THAT(error(R"({"kind": "reduction", "partials": 8, "bytes": 1e6, "reduction": "sum", "time_us": 5})"),
             Catch::Matchers::Contains("$.measurements[0].reduction: unknown reduction kernel \"sum\" (aten_sum or triton)"));
  CHECK_THAT(error(R"({"kind": "reduction", "partials": 8, "bytes": 1e6, "time_us": 5})"), Catch::Matchers::Contains("$.measurements[0]"));
  CHECK_THAT(error(R"({"kind": "reduction", "partials": 8, "bytes": 1e6, "reduction": "triton", "time_us": 5, "m": 4})"),
             Catch::Matchers::Contains("unknown key \"m\""));
  // Simulated: a one-GPU reduction whose time grows with the bytes it reads.
  const Measurement& big = ms[0];
  Measurement half = big;
  half.bytes /= 2;
  CHECK(predict_us(half, test::h100()) < predict_us(big, test::h100()));
}

TEST_CASE("An all-reduce row: its bus bandwidth counts the bytes twice, and it takes longer than a reduce-scatter of its buffer but less than one and an all-gather after it",
          "[measurement]") {
  const auto ms = parse(R"([
      {"kind": "all_reduce", "gpus": 8, "bytes": 1073741824, "busbw_gbps": 400},
      {"kind": "all_reduce", "gpus": 2, "groups": 4, "bytes": 1073741824, "time_us": 4000}])");
  REQUIRE(ms.size() == 2);
  // nccl-tests: busbw = algbw x 2 (n-1)/n for an all-reduce.
  CHECK(ms[0].time_us == Approx(1073741824.0 * 2 * 7 / 8 / 400e9 * 1e6));
  CHECK(ms[1].name == "all_reduce 1073741824 B x2 (4 groups at once)");
  CHECK(measurement_class(ms[0].kind) == "collective");
  CHECK(measurement_json(ms[0])["kind"] == "all_reduce");
  const auto us = [](const std::string& kind) {
    return predict_us(parse(R"([{"kind": ")" + kind + R"(", "gpus": 8, "bytes": 1073741824, "time_us": 1}])").front(), test::h100());
  };
  const double rs = us("reduce_scatter"), ag = us("all_gather"), ar = us("all_reduce");
  CHECK(ar > rs);
  CHECK(ar < rs + ag);
  CHECK(error_of(R"([{"kind": "all_reduce", "gpus": 1, "bytes": 8, "time_us": 1}])") == "$.measurements[0].gpus: must be between 2 and 64");
}

TEST_CASE("An all-to-all row is grouped send/recv: every rank sends 1/n of its buffer to each peer", "[measurement]") {
  const auto ms = parse(R"([{"kind": "all_to_all", "gpus": 4, "groups": 2, "bytes": 1073741824, "busbw_gbps": 300}])");
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].name == "all_to_all 1073741824 B x4 (2 groups at once)");
  CHECK(ms[0].time_us == Approx(1073741824.0 * 3 / 4 / 300e9 * 1e6));  // nccl-tests' busbw: (n-1)/n of the bytes
  const MeasurementDag md = measurement_dag(ms[0]);
  REQUIRE(md.dag.ranks() == 8);
  for (OpId id = 0; id < md.dag.size(); ++id) {
    const auto* sr = std::get_if<SendRecvOp>(&md.dag.op(id).payload);
    REQUIRE(sr != nullptr);
    double sent = 0;
    for (const Transfer& t : sr->sends) {
      CHECK(t.peer / 4 == md.dag.op(id).rank / 4);  // inside its own group
      sent += t.bytes;
    }
    CHECK(sent == Approx(1073741824.0 * 3 / 4));
  }
  // Twice the bytes, about twice the time.
  const auto us = [](double bytes) {
    return predict_us(parse(fmt::format(R"([{{"kind": "all_to_all", "gpus": 8, "bytes": {}, "time_us": 1}}])", bytes)).front(), test::h100());
  };
  CHECK(us(2147483648.0) / us(1073741824.0) == Approx(2).epsilon(0.05));
  // Each rank sends 7/8 of its buffer either way: to seven peers at once it is no faster than
  // to its ring successor, the protocol's overhead being on the port's wire in both.
  const double ring = predict_us(
      parse(R"([{"kind": "all_gather", "gpus": 8, "bytes": 2147483648, "time_us": 1}])").front(), test::h100());
  CHECK(us(2147483648.0) > 0.97 * ring);
  CHECK(us(2147483648.0) < 1.03 * ring);
}

TEST_CASE("An attention row is one flash-attention kernel: FLOPs as FlashAttention counts them, a quadratic in the sequence", "[measurement]") {
  const std::string shape = R"("kind": "attention", "batch": 2, "seq_len": 8192, "heads": 16, "head_dim": 128, "dtype": "bf16")";
  const auto ms = parse(fmt::format(R"([{{{}, "pass": "forward", "implementation": "flash2", "causal": false, "tflops": 369.9}},
      {{{}, "pass": "backward", "time_us": 4788}}])", shape, shape));
  REQUIRE(ms.size() == 2);
  // 4 x batch x seq^2 x heads x head_dim, halved by the causal mask, 2.5x for backward: the
  // figure FlashAttention's benchmark divides by (369.9 TFLOP/s is its 2.972 ms).
  CHECK(ms[0].time_us == Approx(4.0 * 2 * 8192.0 * 8192 * 16 * 128 / 369.9e12 * 1e6));
  CHECK(ms[0].time_us == Approx(2972).epsilon(0.001));
  CHECK(ms[1].attention.causal);          // causal unless said otherwise
  CHECK(ms[1].attention.kernel == AttentionKernel::newest);    // the hardware's newest kernel unless said otherwise
  CHECK(ms[1].attention.kv_heads == 16);  // as many KV heads as query heads unless said otherwise
  CHECK(ms[0].name == "attention flash2 forward 2x8192 heads 16 dim 128 bf16");
  // A round trip keeps the problem.
  const Json j = measurement_json(ms[1]);
  CHECK(j["pass"] == "backward");
  CHECK(parse("[" + j.dump() + "]").front().attention.tokens == 2 * 8192);
  // Predicted: doubling the sequence at the same tokens doubles the work per token, and the
  // causal mask halves it (a quadratic, then its half).
  auto us = [&](int seq, int batch, bool causal) {
    return predict_us(parse(fmt::format(R"([{{"kind": "attention", "batch": {}, "seq_len": {}, "heads": 16, "head_dim": 128, "dtype": "bf16",
        "pass": "forward", "causal": {}, "time_us": 1}}])", batch, seq, causal)).front(), test::h100());
  };
  CHECK(us(8192, 2, true) / us(4096, 4, true) == Approx(2).epsilon(0.05));
  CHECK(us(8192, 2, true) / us(8192, 2, false) == Approx(0.5).epsilon(0.05));
  // Bad rows name their path.
  CHECK_THAT(error_of(fmt::format(R"([{{{}, "pass": "sideways", "time_us": 1}}])", shape)), Catch::Matchers::Contains("$.measurements[0].pass"));
  CHECK_THAT(error_of(fmt::format(R"([{{{}, "pass": "forward", "implementation": "flash9", "time_us": 1}}])", shape)),
             Catch::Matchers::Contains("$.measurements[0].implementation"));
  CHECK_THAT(error_of(fmt::format(R"([{{{}, "pass": "forward", "kv_heads": 5, "time_us": 1}}])", shape)), Catch::Matchers::Contains("$.measurements[0].kv_heads"));
  CHECK_THAT(error_of(R"([{"kind": "attention", "batch": 16777216, "seq_len": 16777216, "heads": 1, "head_dim": 128, "dtype": "bf16", "pass": "forward", "time_us": 1}])"),
             Catch::Matchers::Contains("$.measurements[0].batch"));
  CHECK_THAT(error_of(R"([{"kind": "attention", "batch": 1, "seq_len": 16777216, "heads": 16777216, "head_dim": 1024, "dtype": "bf16", "pass": "forward", "time_us": 1}])"),
             Catch::Matchers::Contains("larger than any GPU memory holds"));
  CHECK_THAT(error_of(R"([{"kind": "attention", "batch": 1, "seq_len": 4194304, "heads": 16, "head_dim": 1024, "causal": false, "dtype": "bf16", "pass": "forward", "time_us": 1}])"),
             Catch::Matchers::Contains("more than the limit 1e18"));
  CHECK_THAT(error_of(fmt::format(R"([{{{}, "pass": "forward", "m": 4, "time_us": 1}}])", shape)), Catch::Matchers::Contains("$.measurements[0]"));
}

TEST_CASE("An elementwise row gives its traffic, and its elements where ATen's loop is priced per element", "[measurement]") {
  const auto ms = parse(R"([{"kind": "elementwise", "bytes_read": 2e6, "bytes_written": 4e6, "elements": 1e6, "loop": "cast", "time_us": 5},
                            {"kind": "elementwise", "bytes_written": 8e6, "time_us": 3, "kernel": "FillFunctor"}])");
  REQUIRE(ms.size() == 2);
  CHECK(ms[0].elementwise.loop == ElementLoop::cast);
  CHECK(ms[0].elementwise.elements == 1e6);
  CHECK(ms[1].elementwise.loop == ElementLoop::vectorized);
  CHECK(ms[1].elementwise.bytes_read == 0);
  CHECK(ms[1].kernel == "FillFunctor");
  CHECK(measurement_class(ms[0].kind) == "elementwise");
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "loop": "strided", "operands": 2, "time_us": 1}])") ==
        "$.measurements[0].elements: missing: a strided loop is priced per element");
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "loop": "unrolled", "elements": 2, "time_us": 1}])") ==
        R"($.measurements[0].loop: unknown loop "unrolled" (vectorized, cast, strided, index, scatter, cat or row_reduction))");
  CHECK(error_of(R"([{"kind": "elementwise", "time_us": 1}])") ==
        "$.measurements[0]: moves no bytes: give bytes_read or bytes_written");
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 1e16, "time_us": 1}])") == "$.measurements[0].bytes_read: larger than a petabyte");
  // The legacy strided loop is priced by its operands; no other loop takes them.
  const auto strided = parse(R"([{"kind": "elementwise", "bytes_read": 8, "bytes_written": 8, "elements": 4, "loop": "strided", "operands": 3, "time_us": 1}])");
  CHECK(strided[0].elementwise.operands == 3);
  CHECK(strided[0].elementwise.dims == 2);  // absent: a broadcast over rows or columns
  CHECK(parse(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "strided", "operands": 2, "dims": 3, "time_us": 1}])")[0]
            .elementwise.dims == 3);
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "strided", "operands": 2, "dims": 26, "time_us": 1}])") ==
        "$.measurements[0].dims: the offset calculator's dimensions: 1 to 25 (ATen's limit)");
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "cast", "dims": 3, "time_us": 1}])") ==
        "$.measurements[0].dims: only a strided loop is priced by its dims");
  // Rows written before operands were counted: a binary op with a broadcast operand.
  CHECK(parse(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "strided", "time_us": 1}])")[0].elementwise.operands == 3);
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "strided", "operands": 1, "time_us": 1}])") ==
        "$.measurements[0].operands: a strided loop's operands: the output and its strided inputs, 2 to 16");
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "cast", "operands": 2, "time_us": 1}])") ==
        "$.measurements[0].operands: only a strided loop is priced by its operands");
}

TEST_CASE("A row reduction row gives its row length, no longer than its elements, and no other loop takes one", "[measurement]") {
  const auto ms = parse(R"([{"kind": "elementwise", "bytes_read": 4e6, "bytes_written": 2e6, "elements": 2e6, "loop": "row_reduction",
                             "row": 4096, "time_us": 5}])");
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].elementwise.loop == ElementLoop::row_reduction);
  CHECK(ms[0].elementwise.row == 4096);
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "row_reduction", "time_us": 1}])") ==
        "$.measurements[0].row: missing: a row_reduction loop is priced per row (the elements each row holds)");
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "row_reduction", "row": 8, "time_us": 1}])") ==
        "$.measurements[0].row: a row of 8 elements is longer than the kernel's 4");
  CHECK(error_of(R"([{"kind": "elementwise", "bytes_read": 8, "elements": 4, "loop": "cast", "row": 2, "time_us": 1}])") ==
        "$.measurements[0].row: only a row_reduction loop is priced per row");
}

TEST_CASE("An attention row names its kernel, and one the hardware gives no rates for is refused, not a crash", "[measurement]") {
  const auto ms = parse(R"([{"kind": "attention", "implementation": "cudnn", "batch": 1, "seq_len": 4096, "heads": 8, "head_dim": 128,
                             "pass": "backward", "dtype": "bf16", "time_us": 100}])");
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].attention.kernel == AttentionKernel::cudnn);
  CHECK(ms[0].name == "attention cudnn backward 1x4096 heads 8 dim 128 causal bf16");
  CHECK(error_of(R"([{"kind": "attention", "implementation": "fa4", "batch": 1, "seq_len": 4096, "heads": 8, "head_dim": 128,
                      "pass": "forward", "dtype": "bf16", "time_us": 100}])") ==
        R"($.measurements[0].implementation: unknown implementation "fa4" (flash, flash2 or cudnn))");
  HardwareSpec no_cudnn = test::h100();
  no_cudnn.attention.cudnn_forward_efficiency = no_cudnn.attention.cudnn_backward_efficiency = 0;
  try {
    check_hardware_serves(ms, no_cudnn);
    FAIL("a cudnn row on hardware without its rates was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("implementation \"cudnn\": hardware h100_sxm gives no cuDNN attention efficiencies") != std::string::npos);
  }
}

TEST_CASE("A copy timed beside a GEMM: the copy is the op timed, the GEMM runs on each GPU's other stream", "[measurement]") {
  const auto ms = parse(R"([{"kind": "peer_copy_with_gemm", "bytes": 4194304, "m": 128, "n": 6656, "k": 16384, "dtype": "bf16",
                              "gbps": 100}])");
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].name == "peer copy 4194304 B beside gemm 128x6656x16384 bf16");
  CHECK(ms[0].gpus == 2);
  CHECK(ms[0].time_us == Approx(4194304.0 / 100e9 * 1e6));
  CHECK(measurement_class(ms[0].kind) == "interference");
  CHECK(measurement_json(ms[0])["kind"] == "peer_copy_with_gemm");
  CHECK(parse("[" + measurement_json(ms[0]).dump() + "]").front().name == ms[0].name);  // written as it is read
  const MeasurementDag md = measurement_dag(ms[0]);
  REQUIRE(md.dag.ranks() == 2);
  CHECK(md.spanned() == std::vector<OpId>{md.target});
  CHECK(std::holds_alternative<CopyOp>(md.dag.op(md.target).payload));
  CHECK(md.dag.op(md.target).rank == 0);
  int gemms = 0;
  for (OpId id = 0; id < md.dag.size(); ++id)
    if (std::holds_alternative<GemmOp>(md.dag.op(id).payload)) {
      ++gemms;
      CHECK(md.dag.op(id).stream != md.dag.op(md.target).stream);
    }
  CHECK(gemms == 2);
  CHECK(error_of(R"([{"kind": "peer_copy_with_gemm", "bytes": 4194304, "time_us": 10}])") == "$.measurements[0]: missing required key \"m\"");
}

TEST_CASE("A collective row can say its NCCL ran without NVLS: an 8-GPU all-reduce then runs the ring", "[measurement]") {
  const auto ms = parse(R"([
      {"kind": "all_reduce", "gpus": 8, "bytes": 1073741824, "time_us": 4000, "nccl_nvls": false},
      {"kind": "all_reduce", "gpus": 8, "bytes": 1073741824, "time_us": 4000},
      {"kind": "all_reduce", "gpus": 2, "groups": 4, "bytes": 1073741824, "time_us": 4000, "nccl_nvls": false}])");
  REQUIRE(ms.size() == 3);
  CHECK_FALSE(ms[0].nccl_nvls);
  CHECK(ms[1].nccl_nvls);
  CHECK(ms[0].name == "all_reduce 1073741824 B x8, NVLS off");
  CHECK(measurement_json(ms[0])["nccl_nvls"] == false);
  CHECK_FALSE(measurement_json(ms[1]).contains("nccl_nvls"));
  CHECK_FALSE(parse("[" + measurement_json(ms[0]).dump() + "]").front().nccl_nvls);  // written as read
  // Without NVLS the row is priced as the ring it ran: as on a model that has no NVLS at all,
  // and slower than NVLS, which reduces in the switch and moves (n+1)/n of the buffer a port
  // where the ring moves 2(n-1)/n.
  HardwareSpec no_nvls = test::h100();
  no_nvls.nccl.nvls = {};
  const double ring = predict_us(ms[0], test::h100());
  CHECK(ring == Approx(predict_us(ms[1], no_nvls)));
  CHECK(predict_us(ms[1], test::h100()) < 0.8 * ring);
  // NCCL sets NVLS up only for three GPUs or more: a pair runs its ring either way.
  Measurement pair_with_nvls = ms[2];
  pair_with_nvls.nccl_nvls = true;
  CHECK(predict_us(ms[2], test::h100()) == Approx(predict_us(pair_with_nvls, test::h100())));
  CHECK(error_of(R"([{"kind": "all_reduce", "gpus": 8, "bytes": 8, "time_us": 1, "nccl_nvls": "off"}])").starts_with("$.measurements[0].nccl_nvls"));
  CHECK_THAT(error_of(R"([{"kind": "local_copy", "bytes": 8, "time_us": 1, "nccl_nvls": false}])"), Catch::Matchers::Contains("unknown key \"nccl_nvls\""));
}

TEST_CASE("A row timed in a burst is predicted at the clock ceiling: a compute-bound GEMM by burst_speed, a copy not at all", "[measurement][power]") {
  const auto ms = parse(R"([
      {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "time_us": 1200, "clock": "burst", "name": "burst"},
      {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "time_us": 1200, "name": "sustained"},
      {"kind": "local_copy", "bytes": 1073741824, "time_us": 400, "clock": "burst", "name": "copy"}])");
  const Measurement& burst = named(ms, "burst");
  const Measurement& sustained = named(ms, "sustained");
  CHECK(burst.burst_clock);
  CHECK_FALSE(sustained.burst_clock);
  const HardwareSpec& hw = test::h100();
  CHECK(predict_us(sustained, hw) / predict_us(burst, hw) == Approx(hw.power.burst_speed).epsilon(0.03));
  Measurement copy_sustained = named(ms, "copy");
  copy_sustained.burst_clock = false;
  CHECK(predict_us(named(ms, "copy"), hw) == Approx(predict_us(copy_sustained, hw)));
  // Written as read; sustained, the default, is not written.
  CHECK(parse("[" + measurement_json(burst).dump() + "]").front().burst_clock);
  CHECK_FALSE(measurement_json(sustained).contains("clock"));
  CHECK(error_of(R"([{"kind": "local_copy", "bytes": 8, "time_us": 1, "clock": "turbo"}])") ==
        R"($.measurements[0].clock: unknown clock "turbo" (sustained or burst))");
  CHECK(error_of(R"([{"kind": "launch", "time_us": 5, "clock": "burst"}])").starts_with(R"($.measurements[0]: unknown key "clock")"));
  // A model that gives no ceiling predicts the row at its parameters' rate, and says so.
  HardwareSpec no_burst = hw;
  no_burst.power.burst_speed = 0;
  CHECK(predict_us(burst, no_burst) == Approx(predict_us(sustained, hw)));
  const auto note = burst_clock_note(ms, no_burst);
  REQUIRE(note.has_value());
  CHECK_THAT(*note, Catch::Matchers::Contains("2 row(s) were timed in bursts and hardware h100_sxm gives no power.burst_speed"));
  CHECK_FALSE(burst_clock_note(ms, hw).has_value());
}

TEST_CASE("A scenario row is predicted with its software's choices on whatever hardware validates it", "[measurement]") {
  // NVLS off and a burst clock, as the scenario says, not as the validating model defaults.
  const auto ms = parse(R"([
      {"kind": "scenario", "variant": "baseline", "time_us": 500, "name": "ar",
       "scenario": {"gpus": 8, "dtype": "bf16", "software": {"nccl_nvls": false, "clock": "burst"},
                    "workload": {"op": "matmul_allreduce", "m": 8192, "k": 1024, "n": 8192}}}])");
  const Scenario run_alone = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "software": {"nccl_nvls": false, "clock": "burst"}, "workload": {"op": "matmul_allreduce", "m": 8192, "k": 1024, "n": 8192}})"), "");
  const double alone = to_us(run_scenario(run_alone).runs.front().metrics.makespan);
  CHECK(predict_us(ms.front(), test::h100()) == Approx(alone));
  CHECK(predict_all_us(ms, test::h100()).front() == Approx(alone));
  // The shipped model as given would run NVLS and the sustained clock: another time.
  const Scenario defaults = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "gpus": 8, "dtype": "bf16",
      "workload": {"op": "matmul_allreduce", "m": 8192, "k": 1024, "n": 8192}})"), "");
  CHECK(to_us(run_scenario(defaults).runs.front().metrics.makespan) != Approx(alone));
}
