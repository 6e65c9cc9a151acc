// gemm_pair: one GEMM on two streams at once, as async TP's alternating streams run its
// submatmuls; measured and predicted from the first start to the last end.
#include "support/catch.hpp"

#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/calibration/measurement.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/microbench_plan.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/nccl_cost.hpp"
#include "tpsim/calibration/result_import.hpp"
#include "tpsim/cuda/measured_timeline.hpp"
#include "tpsim/report/result_writers.hpp"

using namespace tpsim;

namespace {

Measurement row(const std::string& kind, std::int64_t m, std::int64_t n, std::int64_t k) {
  const std::string j = fmt::format(R"({{"format": "tpsim-measurements", "hardware": "h100_sxm", "measurements": [
      {{"kind": "{}", "m": {}, "n": {}, "k": {}, "dtype": "bf16", "time_us": 100}}]}})",
                                    kind, m, n, k);
  return parse_measurements(Json::parse(j), "test.json").front();
}

double one(std::int64_t m, std::int64_t n, std::int64_t k, const HardwareSpec& hw = test::h100()) {
  return predict_us(row("gemm", m, n, k), hw);
}
double pair(std::int64_t m, std::int64_t n, std::int64_t k, const HardwareSpec& hw = test::h100()) {
  return predict_us(row("gemm_pair", m, n, k), hw);
}

}  // namespace

TEST_CASE("a gemm_pair row reads, names itself, writes back and counts as interference", "[measurement]") {
  const Measurement m = row("gemm_pair", 128, 6656, 16384);
  CHECK(m.name == "gemm 128x6656x16384 bf16 x2 on two streams");
  CHECK(measurement_class(m.kind) == "interference");
  const Json j = measurement_json(m);
  CHECK(j.at("kind") == "gemm_pair");
  CHECK(j.at("m") == 128);
  CHECK(parse_measurements(Json{{"format", "tpsim-measurements"}, {"measurements", Json::array({j})}}, "round.json").front().name == m.name);
  // Keys of other kinds are refused with their path.
  CHECK_THROWS_WITH(parse_measurements(Json::parse(R"({"format": "tpsim-measurements", "measurements": [
      {"kind": "gemm_pair", "m": 128, "n": 128, "k": 128, "dtype": "bf16", "time_us": 1, "bytes": 4}]})"), "t.json"),
                    Catch::Matchers::Contains("$.measurements[0]"));
  // Its DAG: two GEMMs on two streams of one GPU, nothing ordering them.
  const MeasurementDag md = measurement_dag(m);
  CHECK(md.dag.ranks() == 1);
  CHECK(md.dag.size() == 2);
  CHECK(md.spanned().size() == 2);
  CHECK(md.dag.op(md.target).stream != md.dag.op(md.beside.front()).stream);
}

TEST_CASE("a GEMM row keeps the vendor kernel that ran it, and other kinds refuse the key", "[measurement]") {
  const auto parse = [](const std::string& rows) {
    return parse_measurements(Json::parse(R"({"format": "tpsim-measurements", "measurements": [)" + rows + "]}"), "t.json");
  };
  const std::string kernel = "cuBLASLt algo 66, tile 128x256, split-K 1, stages 64xAUTO, cluster 2x1x1, swizzle 0, reduction scheme 0";
  const auto ms = parse(R"({"kind": "gemm", "m": 128, "n": 6656, "k": 16384, "dtype": "bf16", "time_us": 146, "kernel": ")" + kernel + R"("})");
  CHECK(ms.front().kernel == kernel);
  CHECK(measurement_json(ms.front()).at("kernel") == kernel);
  CHECK_FALSE(measurement_json(row("gemm", 128, 128, 128)).contains("kernel"));  // none measured, none written
  CHECK_THROWS_WITH(parse(R"({"kind": "peer_copy", "bytes": 1048576, "time_us": 5, "kernel": "x"})"),
                    Catch::Matchers::Contains("$.measurements[0]"));
}

TEST_CASE("two GEMMs that fill the GPU take twice one, and two of a few tiles each run side by side", "[measurement][gemm]") {
  // 8192^3: every SM busy for many waves, so the second waits for SMs: the work adds up.
  CHECK(pair(8192, 8192, 8192) == Approx(2 * one(8192, 8192, 8192)).epsilon(0.03));
  // 128 x 1024 x 512 with 128x256 tiles only: four tiles, too shallow to split K; both fit on
  // the SMs at once, so the pair takes barely longer than one (the second launch's stagger).
  // (The shipped model's odd tiles fill the SMs even here: then the pair shares them.)
  HardwareSpec big_tiles = test::h100();
  std::erase_if(big_tiles.gemm.tiles, [](const GemmTile& t) { return !(t.m == 128 && t.n == 256) && t.serves(Dtype::bf16); });
  const GemmPlan plan = plan_gemm(GemmProblem{128, 1024, 512, Dtype::bf16}, big_tiles);
  REQUIRE(plan.blocks * 2 <= big_tiles.sm.count);
  CHECK(pair(128, 1024, 512, big_tiles) < one(128, 1024, 512, big_tiles) + to_us(big_tiles.launch.host_overhead) + 0.5);
  // Never faster than one alone, never slower than two in a row (they only share).
  for (const auto& [m, n, k] : {std::tuple{64, 6656, 16384}, {256, 4096, 14336}, {1024, 3584, 8192}, {512, 512, 4096}}) {
    INFO(m << "x" << n << "x" << k);
    CHECK(pair(m, n, k) >= one(m, n, k));
    CHECK(pair(m, n, k) <= 2 * one(m, n, k) * 1.02);
  }
}

TEST_CASE("a measured span over ops side by side runs from the first start to the last end", "[cuda][measurement]") {
  // Two repeats of two ops: (10-50, 20-70) and (12-40, 11-60) ms.
  const std::vector<std::vector<OpSample>> reps = {{{0.010, 0.050}, {0.020, 0.070}}, {{0.012, 0.040}, {0.011, 0.060}}};
  CHECK(median_span_us(reps, std::vector<OpId>{0, 1}, false) == Approx((60.0 + 49.0) / 2));
  CHECK(median_span_us(reps, std::vector<OpId>{0}, false) == Approx(median_span_us(reps, 0, false)));
  CHECK_THROWS_AS(median_span_us(reps, std::vector<OpId>{}, false), std::invalid_argument);
}

TEST_CASE("microbench measures async TP's thin submatmuls alone and in pairs", "[measurement]") {
  int thin = 0, pairs = 0;
  for (const Measurement& m : microbench_measurements(8, Dtype::bf16)) {
    const bool async_tp_weight = (m.gemm.n == 6656 && (m.gemm.k == 4096 || m.gemm.k == 16384)) ||
                                 (m.gemm.n == 4096 && m.gemm.k == 14336) || (m.gemm.n == 3584 && m.gemm.k == 8192);
    if (!async_tp_weight || (m.kind != MeasurementKind::gemm && m.kind != MeasurementKind::gemm_pair) || m.gemm.heuristic_rank > 0 ||
        m.gemm.cluster.given())
      continue;
    CHECK(m.gemm.m <= 1024);
    ++(m.kind == MeasurementKind::gemm_pair ? pairs : thin);
  }
  CHECK(thin == 20);
  CHECK(pairs == 20);
}

TEST_CASE("microbench times the thin submatmuls under the heuristic's next seven algorithms too", "[measurement]") {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::set<int>> ranks;  // shape -> ranks timed
  std::set<std::string> names;
  for (const Measurement& m : microbench_measurements(1, Dtype::bf16)) {
    if (m.gemm.heuristic_rank == 0) continue;
    CHECK(m.kind == MeasurementKind::gemm);
    CHECK(m.gemm.heuristic_rank < GemmProblem::kHeuristicAlgorithms);
    CHECK(names.insert(m.name).second);  // a resumed run tells rows apart by name
    ranks[{m.gemm.m, m.gemm.n, m.gemm.k}].insert(m.gemm.heuristic_rank);
  }
  CHECK(ranks.size() == 12);  // 128, 256 and 512 rows against each of the four weights
  for (const auto& [shape, timed] : ranks) CHECK(timed == std::set<int>{1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("microbench times the thin submatmuls' first algorithm in each cluster of up to 8 CTAs", "[measurement]") {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::set<std::pair<int, int>>> clusters;  // shape -> clusters timed
  std::set<std::string> names;
  for (const Measurement& m : microbench_measurements(1, Dtype::bf16)) {
    if (!m.gemm.cluster.given()) continue;
    CHECK(m.kind == MeasurementKind::gemm);
    CHECK(m.gemm.heuristic_rank == 0);
    CHECK(m.gemm.cluster.m * m.gemm.cluster.n <= 8);  // a portable cluster: every Hopper part runs it
    CHECK(names.insert(m.name).second);
    clusters[{m.gemm.m, m.gemm.n, m.gemm.k}].insert({m.gemm.cluster.m, m.gemm.cluster.n});
  }
  CHECK(clusters.size() == 12);
  const std::set<std::pair<int, int>> every = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}, {4, 2}, {2, 4}};
  for (const auto& [shape, timed] : clusters) CHECK(timed == every);  // both orientations of each: rows and columns apart
}

TEST_CASE("microbench times each of NCCL's ring protocols at two sizes: its start-up apart from its rate", "[measurement]") {
  const HardwareSpec& hw = test::h100();
  for (MeasurementKind kind : {MeasurementKind::all_gather, MeasurementKind::reduce_scatter}) {
    std::map<std::string, std::set<double>> sizes;  // protocol -> buffer sizes timed on it
    for (const Measurement& m : microbench_measurements(8, Dtype::bf16))
      if (m.kind == kind && m.gpus == 8 && m.groups == 1) {
        const CollectiveKind c = kind == MeasurementKind::all_gather ? CollectiveKind::all_gather : CollectiveKind::reduce_scatter;
        sizes[plan_ring(c, m.bytes, 8, hw, hw.fabric.nvlink.bytes_per_ps).protocol->name].insert(m.bytes);
      }
    for (const std::string p : {"LL", "LL128", "Simple"}) {
      INFO(p);
      CHECK(sizes[p].size() >= 2);
    }
  }
}

TEST_CASE("microbench times copy-engine pulls beside a weight-streaming and a compute-bound GEMM", "[measurement]") {
  for (const Measurement& m : microbench_measurements(1, Dtype::bf16)) CHECK(m.kind != MeasurementKind::peer_copy_with_gemm);
  int streaming = 0, compute_bound = 0;
  for (const Measurement& m : microbench_measurements(2, Dtype::bf16)) {
    if (m.kind != MeasurementKind::peer_copy_with_gemm) continue;
    INFO(m.name);
    CHECK(m.gpus == 2);
    // Timed wholly beside its GEMM: the copy alone is shorter than the GEMM alone.
    Measurement copy = m, gemm = m;
    copy.kind = MeasurementKind::peer_copy;
    gemm.kind = MeasurementKind::gemm;
    CHECK(predict_us(copy, test::h100()) < predict_us(gemm, test::h100()));
    // A thin GEMM streams its weight from HBM; 8192 rows keep the tensor cores busy.
    ++(m.gemm.m <= 256 ? streaming : compute_bound);
  }
  CHECK(streaming == 2);
  CHECK(compute_bound == 2);
}

TEST_CASE("a measured run's op times carry each GEMM's kernel, and import reads past it", "[measurement]") {
  const RunResult r = test::simulate(R"({"name": "t", "hardware": "h100_sxm", "gpus": 2, "dtype": "bf16",
      "workload": {"op": "allgather_matmul", "m": 2048, "k": 1024, "n": 1024}, "variants": ["async_tp"]})");
  std::map<OpId, std::string> kernels;
  for (OpId id = 0; id < r.runs[0].dag.size(); ++id)
    if (std::holds_alternative<GemmOp>(r.runs[0].dag.op(id).payload)) kernels[id] = "cuBLASLt algo 1, tile 128x128, split-K 1";
  REQUIRE_FALSE(kernels.empty());
  Json j = result_json(r);
  j["results"][0]["op_times"] = op_times_json(r.runs[0], kernels);
  int with = 0;
  for (const Json& op : j["results"][0]["op_times"]) {
    CHECK(op.contains("kernel") == (op.at("kind") == "gemm"));
    with += op.contains("kernel");
  }
  CHECK(with == static_cast<int>(kernels.size()));
  CHECK(import_result_json(j, "measured.json").size() > kernels.size());
}
