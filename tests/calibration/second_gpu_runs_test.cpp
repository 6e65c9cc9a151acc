// The second runs on one H100 SXM and one H200 (another machine of each kind), held out: the
// microbench plan again with cuBLASLt's next algorithms, the same submatmuls in imposed
// thread-block clusters, and one rank of PyTorch's async TP emulated on one GPU.
#include "support/catch.hpp"

#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "tpsim/calibration/validate.hpp"
#include "tpsim/io/hardware_loader.hpp"

using namespace tpsim;

namespace {

Validation validated(const std::string& file, const std::string& hardware) {
  ValidationRequest req;
  req.files = {models_dir() + "/measurements/" + file};
  req.hardware = hardware;
  return validate(req);
}

// Mean |predicted / measured - 1| over the rows `take` keeps, and how many it kept.
std::pair<double, int> mean_error(const Validation& v, const std::function<bool(const Measurement&)>& take) {
  double sum = 0;
  int n = 0;
  for (std::size_t i = 0; i < v.measurements.size(); ++i) {
    if (!take(v.measurements[i])) continue;
    INFO(fmt::format("{}: predicted {:.1f} us, measured {:.1f} us", v.measurements[i].name, v.predicted_us[i], v.measurements[i].time_us));
    CHECK(v.predicted_us[i] > 0);
    sum += std::fabs(v.predicted_us[i] / v.measurements[i].time_us - 1);
    ++n;
  }
  return {n ? sum / n : 0.0, n};
}

bool own_plan_gemm(const Measurement& m) {
  return m.kind == MeasurementKind::gemm && m.gemm.heuristic_rank == 0 && !m.gemm.cluster.given();
}

}  // namespace

TEST_CASE("A second H100 and a second H200 repeat the first microbench runs within 1.5% on average", "[calibration][published]") {
  for (const std::string part : {"h100_sxm", "h200"}) {
    std::map<std::string, double> first;
    for (const Measurement& m : load_measurements_file(models_dir() + "/measurements/" + part + "_microbench.json")) first[m.name] = m.time_us;
    double sum = 0;
    int shared = 0;
    for (const Measurement& m : load_measurements_file(models_dir() + "/measurements/" + part + "_microbench_algorithms.json")) {
      // The launch row is the host's call to the kernel's end: another machine's host.
      if (!first.contains(m.name) || m.kind == MeasurementKind::launch) continue;
      const double change = m.time_us / first[m.name] - 1;
      INFO(fmt::format("{} {}: {:.1f} us, first run {:.1f} us", part, m.name, m.time_us, first[m.name]));
      CHECK(std::fabs(change) < 0.05);
      sum += std::fabs(change);
      ++shared;
    }
    INFO(part);
    CHECK(shared == 62);
    CHECK(sum / shared < 0.015);
  }
}

TEST_CASE("Held out, the second runs' GEMMs read within 6% at tpsim's own plan, and the heuristic's other algorithms within 20% at theirs",
          "[calibration][published]") {
  for (const auto& [file, part] : {std::pair{"h100_sxm_microbench_algorithms.json", "h100_sxm"}, {"h200_microbench_algorithms.json", "h200"}}) {
    const Validation v = validated(file, part);
    INFO(file);
    const auto [own, own_rows] = mean_error(v, own_plan_gemm);
    CHECK(own_rows == 37);
    CHECK(own < 0.06);  // 4.4% on the H100, 4.6% on the H200
    // At their named plans the small unsplit tiles read up to 1.6x slow (README): the L2 operand
    // rate that binds tpsim's small tiles is below what cuBLASLt's reach, cluster or none.
    const auto [ranked, ranked_rows] = mean_error(v, [](const Measurement& m) { return m.gemm.heuristic_rank > 0; });
    CHECK(ranked_rows == 84);
    CHECK(ranked < 0.20);  // 15.1% and 17.2%
  }
}

TEST_CASE("Held out, the submatmuls in imposed clusters read within 12% once the grid is padded to whole clusters and the GPCs hold them",
          "[calibration][published]") {
  // Without the cluster (each row priced at its tile alone) they read 21.4% (H100) and 24.7% (H200):
  // a cluster overhanging the grid doubles the CTAs, clusters of 4 on 128 CTAs take a second wave.
  for (const auto& [file, part] : {std::pair{"h100_sxm_microbench_clusters.json", "h100_sxm"}, {"h200_microbench_clusters.json", "h200"}}) {
    const Validation v = validated(file, part);
    INFO(file);
    const auto [clustered, rows] = mean_error(v, [](const Measurement& m) { return m.gemm.cluster.given(); });
    CHECK(rows == 96);
    CHECK(clustered < (std::string(part) == "h100_sxm" ? 0.12 : 0.14));  // 10.7% and 12.8%
    // An overhanging cluster costs its padding: 4 CTAs along rows over 2 row tiles, the grid doubled.
    for (std::size_t i = 0; i < v.measurements.size(); ++i)
      if (v.measurements[i].name == "gemm 256x3584x8192 bf16, cluster 4x1") {
        CHECK(v.measurements[i].time_us > 2 * 30.0);   // 31.9 us (H100) and 28.7 (H200) in a cluster of 1
        CHECK(v.predicted_us[i] > 2 * 30.0);
      }
  }
}

TEST_CASE("Held out, one rank of async TP emulated on one GPU reads within 8% of its GPU time in a group of 8, 13% in one of 2",
          "[calibration][validate]") {
  // Every peer is this GPU (local copies, barriers over a group of one): the rank's own sequence of
  // submatmuls, copies, barriers and the reduce-scatter's sum, as tpsim simulates the same
  // (workload.emulated_group), never fitted. The smaller the group, the more of a call is the
  // fixed costs around its few submatmuls, which tpsim prices short (README).
  const struct {
    const char* file;
    const char* part;
    double mean;  // read when the files were added -> since the launch gap between two kernels, in the comments
  } files[] = {{"h100_sxm_async_tp_one_rank.json", "h100_sxm", 0.08},      // 6.2% -> 5.5%
               {"h200_async_tp_one_rank.json", "h200", 0.09},              // 7.8% -> 7.2%
               {"h100_sxm_async_tp_one_rank_tp4.json", "h100_sxm", 0.10},  // 8.2% -> 7.3%
               {"h200_async_tp_one_rank_tp4.json", "h200", 0.12},          // 10.2% -> 7.8%
               {"h100_sxm_async_tp_one_rank_tp2.json", "h100_sxm", 0.13}}; // 11.9% -> 8.8%
  for (const auto& f : files) {
    const Validation v = validated(f.file, f.part);
    INFO(f.file);
    const auto [ops, op_rows] = mean_error(v, [](const Measurement& m) { return m.kind == MeasurementKind::scenario; });
    CHECK(op_rows == 13);
    CHECK(ops < f.mean);
  }
}
