#include "support/catch.hpp"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

#include "support/simulate.hpp"
#include "tpsim/io/hardware_report.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

RunResult on(const std::string& hw, const std::string& variants, std::int64_t m = 16384, std::int64_t k = 8192,
             std::int64_t n = 3584, const std::string& dtype = "bf16", int gpus = 8) {
  return simulate(fmt::format(R"({{"hardware": "{}", "gpus": {}, "dtype": "{}",
      "workload": {{"op": "allgather_matmul", "m": {}, "k": {}, "n": {}}}, "variants": [{}]}})",
                              hw, gpus, dtype, m, k, n, variants));
}

// The shipped h100_sxm file as JSON, to break one key at a time.
Json shipped_h100_json() {
  std::ifstream in(models_dir() + "/h100_sxm.json");
  return Json::parse(in);
}

// The loader's one-line complaint about `j`, or "" where it loads.
std::string error_of(const Json& j) {
  try {
    parse_hardware(j, "test");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("Every shipped hardware model loads and simulates both strategies", "[hardware]") {
  const auto names = shipped_hardware_names();
  REQUIRE(names.size() >= 8);
  for (const auto& name : names) {
    INFO(name);
    const auto r = on(name, R"("baseline", "async_tp")", 4096);
    CHECK(makespan_us(r, "baseline") > 0);
    CHECK(makespan_us(r, "async_tp") > 0);
  }
  CHECK_THAT(hardware_list(), Catch::Matchers::Contains("h100_pcie") && Catch::Matchers::Contains("pairs"));
  CHECK_THAT(hardware_list(), Catch::Matchers::Contains("500 W: x0.844") && Catch::Matchers::Contains("700 W"));
  CHECK_THAT(hardware_show("h800"), Catch::Matchers::Contains("fabric.nvlink.bandwidth_per_direction"));
}

TEST_CASE("A hardware file with a base inherits everything it does not override", "[hardware]") {
  const HardwareSpec h800 = load_hardware_file(models_dir() + "/h800.json");
  CHECK(h800.sm.count == h100().sm.count);
  CHECK(h800.fabric.nvlink.bytes_per_ps == Approx(h100().fabric.nvlink.bytes_per_ps * 200 / 450));
}

TEST_CASE("H800's narrower NVLink makes the exposed all-gather slower, and async TP pays more", "[hardware]") {
  const auto h100r = on("h100_sxm", R"("baseline", "async_tp")");
  const auto h800r = on("h800", R"("baseline", "async_tp")");
  CHECK(makespan_us(h800r, "baseline") > makespan_us(h100r, "baseline") * 1.2);
  CHECK(*h800r.speedup(variant(h800r, "async_tp")) > *h100r.speedup(variant(h100r, "async_tp")));
}

TEST_CASE("H200's faster HBM speeds up the memory-bound weight re-reads of small shards", "[hardware]") {
  const auto h100r = on("h100_sxm", R"("async_tp")", 512);
  const auto h200r = on("h200", R"("async_tp")", 512);
  CHECK(makespan_us(h200r, "async_tp") < 0.85 * makespan_us(h100r, "async_tp"));
}

TEST_CASE("Without NVSwitch, PyTorch's async TP pulls over PCIe and loses to the NCCL ring", "[hardware]") {
  const auto r = on("h100_pcie", R"("baseline", "async_tp")");
  CHECK(makespan_us(r, "async_tp") > makespan_us(r, "baseline"));
}

TEST_CASE("A GPU without fp8 math rejects an fp8 scenario", "[hardware]") {
  CHECK_THROWS_WITH(on("a100_sxm", R"("baseline")", 4096, 4096, 4096, "fp8"),
                    Catch::Matchers::Contains("$.dtype: hardware a100_sxm has no fp8 math"));
}

TEST_CASE("Across two nodes NCCL's rails keep the ring near NVLink speed, one NIC per hop does not", "[hardware]") {
  // The same 16 GPUs on one (hypothetical) 16-port NVSwitch node.
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("tpsim_hw16_{}", ::getpid());
  std::filesystem::create_directories(dir);
  // Both with NCCL's send/recv blocks never binding: the ring's links are what is compared.
  const std::string node16 = (dir / "h100_sxm_16.json").string(), nodes2 = (dir / "h100_sxm_2node_links.json").string();
  const std::string links_only = R"("nccl": {"p2p": {"channel_bandwidth": {"value": 100000, "unit": "GB/s", "source": "test"}}})";
  std::ofstream(node16) << R"({"name": "h100_sxm_16", "base": "h100_sxm",
      "fabric": {"gpus_per_node": {"value": 16, "unit": "count", "source": "test: one 16-GPU NVSwitch node"}}, )" << links_only << "}";
  std::ofstream(nodes2) << R"({"name": "h100_sxm_2node_links", "base": "h100_sxm_2node", )" << links_only << "}";
  const auto one = on(node16, R"("baseline", "ring")", 16384, 8192, 3584, "bf16", 16);
  const auto two = on(nodes2, R"("baseline", "ring")", 16384, 8192, 3584, "bf16", 16);
  std::filesystem::remove_all(dir);
  // NCCL's channels leave each node from a different GPU: each GPU's NIC carries 1/8 of its
  // ring bytes and its NVLink port 7/8, so the ring runs at min(NVLink x 8/7, 8 NICs x 47 GB/s),
  // near one NVLink port (NVIDIA's DGX H100 figures: about 370 GB/s of ring bus bandwidth in
  // one node, 380 across two; nccl-tests issue 309).
  CHECK(makespan_us(two, "baseline") < 1.1 * makespan_us(one, "baseline"));
  CHECK(makespan_us(two, "baseline") > 0.9 * makespan_us(one, "baseline"));
  // A JAX ppermute ring sends each hop through one GPU's NIC.
  CHECK(makespan_us(two, "ring") > 2 * makespan_us(one, "ring"));
}

TEST_CASE("A hardware file with the old single strided rate says what replaced it, and a grouped GEMM section is checked", "[hardware]") {
  const Json shipped = shipped_h100_json();
  Json old = shipped;
  old["elementwise"]["strided_sm_rate"] = old["elementwise"]["strided_operand_rate"];
  CHECK(error_of(old).starts_with("$.elementwise.strided_sm_rate: replaced by strided_operand_rate"));
  // The grouped kernel's two tiles are one family: they serve the same dtypes.
  Json mixed = shipped;
  mixed["gemm"]["grouped"]["small_tile"]["dtypes"] = Json::array({"fp16"});
  CHECK(error_of(mixed) == "$.gemm.grouped: small_tile and large_tile must serve the same dtypes (one kernel family)");
  // The fp8 kernel's large-problem tile comes with its threshold, and no dtype has two grouped kernels.
  Json lone = shipped;
  lone["gemm"]["scaled_grouped"].erase("large_problem_dimension");
  CHECK(error_of(lone) == "$.gemm.scaled_grouped: give \"large_problem_tile\" and \"large_problem_dimension\" together");
  Json twice = shipped;
  for (const char* t : {"small_tile", "large_tile", "large_problem_tile"}) twice["gemm"]["scaled_grouped"][t]["dtypes"] = Json::array({"bf16"});
  CHECK(error_of(twice) == "$.gemm.scaled_grouped: serves a dtype gemm.grouped serves: each dtype has one grouped kernel");
  CHECK(error_of(shipped).empty());
}

TEST_CASE("A reduction kernel's rounds come with the loads a round holds, and neither alone", "[hardware]") {
  const Json shipped = shipped_h100_json();
  Json rate_only = shipped;
  rate_only["reduction"]["aten_sum"].erase("loads_per_round");
  CHECK(error_of(rate_only) ==
        "$.reduction.aten_sum: needs both \"sm_round_output_bandwidth\" and \"loads_per_round\", or neither");
  Json fraction = shipped;
  fraction["reduction"]["aten_sum"]["loads_per_round"]["value"] = 2.5;
  CHECK(error_of(fraction) == "$.reduction.aten_sum.loads_per_round.value: must be a whole number");
  // Without either, the kernel has no rounds (the other GPUs' files).
  Json none = shipped;
  none["reduction"]["aten_sum"].erase("loads_per_round");
  none["reduction"]["aten_sum"].erase("sm_round_output_bandwidth");
  CHECK(parse_hardware(none, "test").reduction.loads_per_round[static_cast<int>(ReductionKernel::aten_sum)] == 0);
}

TEST_CASE("A looped row reduction's element rate comes with its per-row cost, and neither alone", "[hardware]") {
  const Json shipped = shipped_h100_json();
  Json rate_only = shipped;
  rate_only["elementwise"].erase("row_reduction_row_cost");
  CHECK(error_of(rate_only) == "$.elementwise: needs both \"row_reduction_sm_rate\" and \"row_reduction_row_cost\", or neither");
  Json bandwidth = shipped;  // a cost per row is a time
  bandwidth["elementwise"]["row_reduction_row_cost"]["unit"] = "GB/s";
  CHECK_THAT(error_of(bandwidth), Catch::Matchers::StartsWith("$.elementwise.row_reduction_row_cost.unit: unit \"GB/s\""));
  Json none = shipped;
  none["elementwise"].erase("row_reduction_row_cost");
  none["elementwise"].erase("row_reduction_sm_rate");
  CHECK(parse_hardware(none, "test").elementwise.row_reduction_sm_elements_per_ps == 0);
  const HardwareSpec hw = parse_hardware(shipped, "test");
  CHECK(hw.elementwise.row_reduction_row_cost == 240800);  // 240.8 ns
  CHECK(hw.elementwise.row_reduction_sm_elements_per_ps == Approx(8.6e9 / 1e12));
}

TEST_CASE("A power section is checked: a limit in watts, the sustained draw and the law's exponent together", "[hardware][power]") {
  const Json shipped = shipped_h100_json();
  Json no_exponent = shipped;
  no_exponent["power"].erase("speed_power_exponent");
  CHECK(error_of(no_exponent) == "$.power: missing required key \"speed_power_exponent\"");
  Json kilowatts = shipped;
  kilowatts["power"]["limit"]["unit"] = "kW";
  CHECK_THAT(error_of(kilowatts), Catch::Matchers::StartsWith("$.power.limit.unit: unit \"kW\" is not a power unit"));
  Json typo = shipped;
  typo["power"]["limt"] = typo["power"]["limit"];
  CHECK_THAT(error_of(typo), Catch::Matchers::StartsWith("$.power"));
  CHECK_THAT(error_of(typo), Catch::Matchers::Contains("limt"));
  // Without a power section the parameters' rate stands.
  Json none = shipped;
  none.erase("power");
  CHECK(parse_hardware(none, "test").power.tensor_speed() == 1.0);
}

TEST_CASE("The 500 W HBM2e H100 keeps the SXM's nominal peak and runs its tensor cores at the power law's speed", "[hardware][power]") {
  const HardwareSpec sxm = load_hardware_file(models_dir() + "/h100_sxm.json");
  const HardwareSpec capped = load_hardware_file(models_dir() + "/h100_hbm2e_500w.json");
  // The SXM's own limit (700 W) is above the draw its GEMM rows were timed at: their rate stands.
  CHECK(sxm.power.tensor_speed() == 1.0);
  CHECK(capped.peak_flops_per_ps == sxm.peak_flops_per_ps);  // MFU's denominator: the datasheet's
  const double expected = std::pow(500.0 / sxm.power.tensor_sustained_w, 1.0 / sxm.power.speed_power_exponent);
  CHECK(capped.power.tensor_speed() == Approx(expected));
  CHECK(capped.power.tensor_speed() == Approx(0.844).epsilon(0.002));
  CHECK(capped.peak_flops_per_sm_per_ps(Dtype::bf16) == Approx(sxm.peak_flops_per_sm_per_ps(Dtype::bf16) * expected));
  CHECK(capped.peak_flops_per_sm_per_ps(Dtype::fp8) == Approx(sxm.peak_flops_per_sm_per_ps(Dtype::fp8) * expected));
  // FFMA kernels draw less than tensor-core ones: not slowed.
  CHECK(capped.peak_flops_per_sm_per_ps(Dtype::fp32) == sxm.peak_flops_per_sm_per_ps(Dtype::fp32));
}

TEST_CASE("The 650 W HBM2e H100 of PyTorch's symmetric-memory benchmarks lies between the 500 W part and the SXM", "[hardware][power]") {
  const HardwareSpec sxm = load_hardware_file(models_dir() + "/h100_sxm.json");
  const HardwareSpec at500 = load_hardware_file(models_dir() + "/h100_hbm2e_500w.json");
  const HardwareSpec at650 = load_hardware_file(models_dir() + "/h100_hbm2e_650w.json");
  // The same HBM2e as the 500 W part; more power, faster tensor cores, still below the SXM's draw.
  CHECK(at650.memory.hbm_bytes_per_ps == at500.memory.hbm_bytes_per_ps);
  CHECK(at650.power.limit_w == 650.0);
  CHECK(at650.power.tensor_speed() > at500.power.tensor_speed());
  CHECK(at650.power.tensor_speed() < sxm.power.tensor_speed());
  CHECK(at650.power.tensor_speed() == Approx(std::pow(650.0 / sxm.power.tensor_sustained_w, 1.0 / sxm.power.speed_power_exponent)));
  // A compute-bound GEMM takes 1/speed as long; a thin shard, whose weight read from the same
  // HBM2e bounds it, gains less from the higher limit.
  const double big500 = makespan_us(on("h100_hbm2e_500w", R"("baseline")", 16384, 8192, 8192), "baseline");
  const double big650 = makespan_us(on("h100_hbm2e_650w", R"("baseline")", 16384, 8192, 8192), "baseline");
  const double thin500 = makespan_us(on("h100_hbm2e_500w", R"("baseline")", 128, 8192, 8192), "baseline");
  const double thin650 = makespan_us(on("h100_hbm2e_650w", R"("baseline")", 128, 8192, 8192), "baseline");
  CHECK(big650 < big500);
  CHECK(thin650 <= thin500);
  CHECK(thin650 / thin500 > big650 / big500);
  CHECK_THAT(hardware_list(), Catch::Matchers::Contains("650 W: x0.967"));
}

TEST_CASE("A hardware file's library split rule is checked: its dtypes, its reference tile, its numbers with sources", "[hardware]") {
  const Json shipped = shipped_h100_json();
  Json tile = shipped;
  tile["gemm"]["library_split"]["reference_tile"] = "128x";
  CHECK(error_of(tile) == "$.gemm.library_split.reference_tile: must look like \"128x128\" (rows x columns, each 1 to 4096), got \"128x\"");
  Json dtype = shipped;
  dtype["gemm"]["library_split"]["dtypes"] = Json::array({"bf17"});
  CHECK(error_of(dtype) == "$.gemm.library_split.dtypes[0]: unknown dtype \"bf17\" (bf16, fp16, fp32 or fp8)");
  Json unsourced = shipped;
  unsourced["gemm"]["library_split"]["depth"]["source"] = "";
  CHECK(error_of(unsourced) == "$.gemm.library_split.depth.source: must say where the number comes from");
  Json misspelled = shipped;
  misspelled["gemm"]["library_split"]["min_slices"] = misspelled["gemm"]["library_split"]["min_slice"];
  CHECK(error_of(misspelled) == "$.gemm.library_split: unknown key \"min_slices\" (did you mean \"min_slice\"?)");
  Json fraction = shipped;
  fraction["gemm"]["library_split"]["min_slice"]["value"] = 2816.5;
  CHECK(error_of(fraction) == "$.gemm.library_split.min_slice.value: must be a whole number");
}

TEST_CASE("A hardware file's fp8 execution is checked: cuBLAS's rowwise tile among its fp8 tiles, slow accumulation a fraction", "[hardware]") {
  const Json shipped = shipped_h100_json();
  Json bf16_tile = shipped;
  bf16_tile["gemm"]["library_rowwise"]["tile"] = "128x256x64";
  CHECK(error_of(bf16_tile) == "$.gemm.library_rowwise.tile: 128x256x64 is not one of gemm.tiles serving fp8 (its kernel family's rate comes from there)");
  Json malformed = shipped;
  malformed["gemm"]["library_rowwise"]["tile"] = "128x128";
  CHECK(error_of(malformed) == "$.gemm.library_rowwise.tile: must look like \"128x128x128\" (each 1 to 4096), got \"128x128\"");
  Json unsourced = shipped;
  unsourced["gemm"]["library_rowwise"]["source"] = "";
  CHECK(error_of(unsourced) == "$.gemm.library_rowwise.source: must say where the tile comes from (the kernels seen to run)");
  Json faster = shipped;
  faster["gemm"]["slow_accumulation"]["value"] = 1.1;
  CHECK(error_of(faster) == "$.gemm.slow_accumulation.value: a fraction must be at most 1");  // promoting sums can only slow it
  Json misspelled = shipped;
  misspelled["gemm"]["slow_accumulate"] = misspelled["gemm"]["slow_accumulation"];
  CHECK_THAT(error_of(misspelled), Catch::Matchers::StartsWith("$.gemm: unknown key \"slow_accumulate\""));
  // The H200 inherits both (same SMs, same cuBLAS kernels).
  const HardwareSpec h200 = load_hardware_file(models_dir() + "/h200.json");
  CHECK(h200.gemm.slow_accumulation == h100().gemm.slow_accumulation);
  CHECK(h200.gemm.library_rowwise.tile.m == 128);
}

TEST_CASE("A hardware file's resident clusters are checked: whole clusters per size that fit its SMs, with a source", "[hardware]") {
  const Json shipped = shipped_h100_json();
  CHECK(error_of(shipped).empty());
  Json too_many = shipped;
  too_many["sm"]["resident_clusters"]["value"][3] = 34;  // 136 CTAs in clusters of 4 on 132 SMs
  CHECK(error_of(too_many) == "$.sm.resident_clusters.value[3]: 34 clusters of 4 CTAs need 136 SMs, more than the 132 there are");
  Json fraction = shipped;
  fraction["sm"]["resident_clusters"]["value"][1] = 65.5;
  CHECK(error_of(fraction) == "$.sm.resident_clusters.value[1]: must be a whole number of at least 1, got 65.5");
  Json huge = shipped;
  huge["sm"]["resident_clusters"]["value"][15] = 1152921504606846976;  // 2^60: its CTAs would overflow
  CHECK(error_of(huge) == "$.sm.resident_clusters.value[15]: 1152921504606846976 clusters are more than the 132 SMs there are");
  Json longer = shipped;
  longer["sm"]["resident_clusters"]["value"].push_back(6);
  CHECK(error_of(longer) == "$.sm.resident_clusters.value: must list the clusters of 1 to at most 16 CTAs, got 17 entries");
  Json unsourced = shipped;
  unsourced["sm"]["resident_clusters"]["source"] = "";
  CHECK(error_of(unsourced) == "$.sm.resident_clusters.source: must say where the number comes from");
  Json unit = shipped;
  unit["sm"]["resident_clusters"]["unit"] = "CTAs";
  CHECK(error_of(unit) == "$.sm.resident_clusters.unit: must be \"count\" (clusters resident at once, per cluster size)");
  Json none = shipped;
  none["sm"].erase("resident_clusters");  // not measured: no limit known
  REQUIRE(error_of(none).empty());
  CHECK(parse_hardware(none, "test").sm.resident_cluster_ctas(4) == 0);
  CHECK(parse_hardware(shipped, "test").sm.resident_cluster_ctas(8) == 120);
  CHECK(parse_hardware(shipped, "test").sm.resident_cluster_ctas(1) == 0);  // single CTAs: as many as fit
}

TEST_CASE("On the H100 a kernel after another kernel waits longer than the same kernel launched again", "[hardware]") {
  // The step profiles' gaps between different kernels against tiny kernels replayed back to back
  // (models/h100_sxm.json's sources; the H200 takes them); the parts without that measurement
  // give both one guess.
  const HardwareSpec h100 = load_hardware_file(models_dir() + "/h100_sxm.json");
  CHECK(h100.launch.device_latency > 1.8 * h100.launch.repeat_latency);
  CHECK(load_hardware_file(models_dir() + "/h200.json").launch.device_latency == h100.launch.device_latency);
  for (const char* name : {"a100_sxm", "b200", "h100_pcie"}) {
    const HardwareSpec hw = load_hardware_file(models_dir() + "/" + name + ".json");
    CHECK(hw.launch.repeat_latency == hw.launch.device_latency);
  }
}

TEST_CASE("The L2's capacity comes with the share a dirty flush leaves dirty, and H200 keeps H100's share in its larger L2", "[hardware]") {
  const Json shipped = shipped_h100_json();
  Json alone = shipped;
  alone["memory"].erase("l2_dirty_share");
  CHECK(error_of(alone) == "$.memory: give \"l2_capacity\" and \"l2_dirty_share\" together");
  Json whole = shipped;
  whole["memory"]["l2_dirty_share"]["value"] = 1.5;
  CHECK(error_of(whole) == "$.memory.l2_dirty_share.value: a fraction must be at most 1");
  const HardwareSpec h100 = resolve_hardware("h100_sxm", "$.hardware", "");
  const HardwareSpec h200 = resolve_hardware("h200", "$.hardware", "");
  CHECK(h100.memory.l2_capacity_bytes == 50.0 * 1024 * 1024);
  CHECK(h200.memory.l2_capacity_bytes == 60.0 * 1024 * 1024);
  CHECK(h200.memory.l2_dirty_bytes / h200.memory.l2_capacity_bytes == Approx(h100.memory.l2_dirty_bytes / h100.memory.l2_capacity_bytes));
}
