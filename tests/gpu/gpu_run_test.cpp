// The CUDA backend on real GPUs: physical expectations that hold on any GPU,
// and measured runs that have the shape of simulated ones.
#include "support/catch.hpp"

#include <algorithm>
#include <set>
#include <string>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/microbench_plan.hpp"
#include "tpsim/cuda/gpu_executor.hpp"
#include "tpsim/cuda/measure_on_gpus.hpp"
#include "tpsim/io/workload_kinds.hpp"

using namespace tpsim;

namespace {

Measurement measured(const Measurement& m) { return measure_on_gpus(m, GpuRunOptions{.warmup = 2, .repeats = 5, .stand_in_us = {}}); }
double measure_us(const Measurement& m) { return measured(m).time_us; }

Measurement gemm(std::int64_t n) {
  Measurement m;
  m.kind = MeasurementKind::gemm;
  m.gemm = {n, n, n, Dtype::bf16};
  return m;
}

}  // namespace

TEST_CASE("A GEMM twice as large each way takes about eight times as long", "[gpu]") {
  const double small = measure_us(gemm(4096));
  const double large = measure_us(gemm(8192));
  INFO(fmt::format("4096^3 {:.1f} us, 8192^3 {:.1f} us", small, large));
  CHECK(large / small == Approx(8).epsilon(0.3));
}

TEST_CASE("cuBLASLt says which tile and split-K it picked, and a pair of GEMMs is never faster than one", "[gpu]") {
  const std::string algo = cuda_gemm_algo(GemmProblem{128, 6656, 16384, Dtype::bf16});
  INFO(algo);
  CHECK(algo.find("tile ") != std::string::npos);
  CHECK(algo.find("split-K ") != std::string::npos);
  Measurement one = gemm(4096);
  one.gemm = {128, 6656, 16384, Dtype::bf16};
  Measurement pair = one;
  pair.kind = MeasurementKind::gemm_pair;
  const double t1 = measure_us(one), t2 = measure_us(pair);
  INFO(fmt::format("128x6656x16384: one {:.1f} us, two on two streams {:.1f} us", t1, t2));
  CHECK(t2 >= 0.9 * t1);
  CHECK(t2 <= 2.3 * t1);
}

TEST_CASE("Copy-engine peer copies scale with bytes", "[gpu]") {
  if (cuda_device_count() < 2) {
    WARN("one GPU: peer copies not measured");
    return;
  }
  Measurement m;
  m.kind = MeasurementKind::peer_copy;
  m.bytes = 256.0 * 1048576;
  const double a = measure_us(m);
  m.bytes *= 2;
  const double b = measure_us(m);
  CHECK(b / a == Approx(2).epsilon(0.15));
}

TEST_CASE("Two halves of the GPUs gather at once in communicators split from the world's", "[gpu]") {
  const int half = cuda_device_count() / 2;
  if (half < 2) {
    WARN("fewer than 4 GPUs: concurrent groups not measured");
    return;
  }
  Measurement m;
  m.kind = MeasurementKind::all_gather;
  m.bytes = 256.0 * 1048576;
  m.gpus = half;
  const double alone = measure_us(m);
  m.groups = 2;
  const double both = measure_us(m);
  INFO(fmt::format("all_gather 256 MiB x{}: alone {:.1f} us, beside the other half {:.1f} us", half, alone, both));
  // The halves share no GPU; on NVSwitch they share no link either.
  CHECK(both > 0.8 * alone);
  CHECK(both < 1.3 * alone);
}

TEST_CASE("A measured async-TP run finishes every op in stream order", "[gpu]") {
  // An all-gather needs two GPUs (a scenario of one is refused); on one GPU, a lone GEMM.
  const int gpus = cuda_device_count() >= 2 ? 2 : 1;
  const std::string workload = gpus > 1 ? R"({"op": "allgather_matmul", "m": 4096, "k": 4096, "n": 4096})"
                                        : R"({"op": "matmul", "m": 2048, "k": 4096, "n": 4096})";
  const Scenario s = parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
      "workload": {}}})", gpus, workload)), "");
  const Dag dag = build_dag(s, gpus > 1 ? "async_tp" : "baseline");
  const auto samples = run_on_gpus(dag, plan_launches(dag), GpuRunOptions{.warmup = 1, .repeats = 3, .stand_in_us = {}});
  const Timeline tl = measured_timeline(dag, samples, cuda_sm_counts(gpus));
  for (int r = 0; r < dag.ranks(); ++r) {
    std::map<int, Tick> stream_end;
    for (OpId id : dag.program(r)) {
      const Op& op = dag.op(id);
      CHECK(tl.ops[id].end >= tl.ops[id].start);
      CHECK(tl.ops[id].start >= stream_end[op.stream] - kPicosPerUs / 1000);  // in order on its stream (1 ns of event jitter)
      stream_end[op.stream] = tl.ops[id].end;
    }
  }
}

TEST_CASE("A tiny kernel takes microseconds from the host's call to its end", "[gpu]") {
  const double us = time_tiny_kernel_us(GpuRunOptions{.warmup = 5, .repeats = 20, .stand_in_us = {}});
  INFO(us << " us");
  CHECK(us > 1);    // a launch and a sync cannot be faster
  CHECK(us < 200);  // nor as slow as a page of work
}

TEST_CASE("A stand-in holds the GPU for the time it is given, and a GEMM after it waits", "[gpu]") {
  Dag dag(1);
  const OpId attention = dag.add(0, 0, "attention", AttentionOp{4096, 4096, 32, 8, 128, true, false, Dtype::bf16});
  const OpId gemm = dag.add(0, 1, "gemm", GemmOp{{4096, 4096, 4096, Dtype::bf16}});  // another stream: no SM is free for it
  GpuRunOptions options{.warmup = 1, .repeats = 3, .stand_in_us = {{attention, 300.0}}};
  const auto samples = run_on_gpus(dag, plan_launches(dag), options);
  const double held = median_span_us(samples, attention, false);
  INFO(held << " us held");
  CHECK(held >= 300);
  CHECK(held < 330);
  // The GEMM, launched beside it, cannot finish before the SMs are free again.
  CHECK(median_span_us(samples, gemm, true) > 300);
}

TEST_CASE("cuBLASLt's first algorithm for a thin GEMM runs in the clusters asked, each timed and named with its plan", "[gpu]") {
  Measurement row = gemm(256);
  row.gemm = {256, 3584, 8192, Dtype::bf16};
  int ran = 0;
  for (const GemmProblem::Cluster cluster : {GemmProblem::Cluster{1, 1}, {2, 1}, {1, 2}, {2, 4}}) {
    row.gemm.cluster = cluster;
    const auto m = measure_microbench_row(row, GpuRunOptions{.warmup = 1, .repeats = 3, .stand_in_us = {}});
    if (!m) continue;  // a cluster this algorithm does not run in
    ++ran;
    INFO(m->kernel);
    CHECK(m->time_us > 0);
    CHECK(m->gemm.named_plan.given());
    CHECK(m->kernel.find(fmt::format("cluster {}x{}x1", cluster.m, cluster.n)) != std::string::npos);  // what ran is what was asked
  }
  CHECK(ran >= 2);
}

TEST_CASE("cuBLASLt's next algorithms for a thin GEMM are other kernels, each timed and named with the plan it ran", "[gpu]") {
  Measurement row = gemm(256);
  row.gemm = {256, 3584, 8192, Dtype::bf16};
  const int offered = cuda_gemm_algorithm_count(row.gemm);
  INFO(offered << " algorithms offered");
  REQUIRE(offered >= 2);
  CHECK(offered <= GemmProblem::kHeuristicAlgorithms);
  std::set<std::string> kernels;
  for (int rank = 0; rank < std::min(offered, 4); ++rank) {
    row.gemm.heuristic_rank = rank;
    const auto m = measure_microbench_row(row, GpuRunOptions{.warmup = 1, .repeats = 3, .stand_in_us = {}});
    REQUIRE(m.has_value());
    INFO(m->kernel);
    CHECK(m->time_us > 0);
    CHECK(m->gemm.named_plan.given() == (rank > 0));  // the first is cuBLAS's own choice, priced as tpsim chooses
    kernels.insert(m->kernel);
  }
  CHECK(kernels.size() >= 2);
  row.gemm.heuristic_rank = offered;  // one past what the heuristic offers: nothing to run
  CHECK_FALSE(measure_microbench_row(row, GpuRunOptions{.warmup = 1, .repeats = 3, .stand_in_us = {}}).has_value());
}

TEST_CASE("On a GPU with a shipped model (H100 SXM, H200) every microbench row it prices is within 1.5x of it", "[gpu][h100]") {
  // Copies whose source and destination fit in the L2 (50 MB on both parts) stay there between
  // microbench's back-to-back repeats; tpsim prices a copy from HBM (README: 16 MiB reads +59%).
  constexpr double kL2Bytes = 50e6;
  const std::string name = cuda_device_name(0);
  std::string model;
  if (name.find("H100") != std::string::npos && name.find("HBM3") != std::string::npos) model = "h100_sxm";
  if (name.find("H200") != std::string::npos) model = "h200";
  if (model.empty()) {
    WARN("neither an H100 SXM nor an H200 (" << name << "): no shipped model is checked against it");
    return;
  }
  const HardwareSpec hw = load_hardware_file(models_dir() + "/" + model + ".json");
  for (const Measurement& planned : microbench_measurements(std::min(cuda_device_count(), 8), Dtype::bf16)) {
    if (planned.gemm.cluster.given()) continue;  // an imposed cluster: up to 1.5x off where it adds a wave (README)
    const auto row = measure_microbench_row(planned, GpuRunOptions{.warmup = 2, .repeats = 5, .stand_in_us = {}});
    if (!row) continue;  // an algorithm this cuBLASLt does not offer
    const Measurement& m = *row;  // timed as microbench times it: events round each launch, priced at the plan it ran
    if (m.kind == MeasurementKind::launch) {  // the host's call to the kernel's end: this host's, not the GPU's
      WARN(fmt::format("launch: {:.1f} us on this host, {} predicts {:.1f} us for its host (not checked)", m.time_us, model,
                       predict_us(m, hw)));
      continue;
    }
    const double predicted = predict_us(m, hw);
    if (m.kind == MeasurementKind::local_copy && 2 * m.bytes <= kL2Bytes) {
      WARN(fmt::format("{}: {:.1f} us from L2, {} predicts {:.1f} us from HBM (not checked)", m.name, m.time_us, model, predicted));
      continue;
    }
    // Another algorithm's small tile, priced at its plan, reads up to 1.6x slow: the L2 operand
    // rate that binds tpsim's small tiles is below what cuBLASLt's reach (README, the ranked rows).
    const double band = m.gemm.heuristic_rank > 0 ? 1.75 : 1.5;
    INFO(fmt::format("{}: measured {:.1f} us, {} predicts {:.1f} us", m.name, m.time_us, model, predicted));
    CHECK(predicted / m.time_us > 1 / band);
    CHECK(predicted / m.time_us < band);
  }
}
