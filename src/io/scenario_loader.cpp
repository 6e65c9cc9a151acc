#include <filesystem>

#include <fmt/format.h>

#include "tpsim/cost/l2_writeback.hpp"
#include "tpsim/cost/reduction_cost.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/io/workload_kinds.hpp"

namespace tpsim {

namespace {

SoftwareChoices parse_software(const ObjectReader& r) {
  SoftwareChoices sw;
  if (r.has("symm_mem_reduction")) {
    const std::string k = r.string("symm_mem_reduction");
    const auto kernel = parse_reduction_kernel(k);
    if (!kernel) fail_at(r.child_path("symm_mem_reduction"), fmt::format("unknown reduction \"{}\" (aten_sum or triton)", k));
    sw.symm_mem_reduction = *kernel;
  }
  if (r.has("op_issue")) {
    const std::string how = r.string("op_issue");
    const auto issue = parse_host_issue(how);
    if (!issue) fail_at(r.child_path("op_issue"), fmt::format("unknown op issue \"{}\" (compiled, eager, cuda_graph or enqueued)", how));
    sw.op_issue = *issue;
  }
  sw.nccl_nvls = r.optional_bool("nccl_nvls").value_or(true);
  sw.nccl_collnet = r.optional_bool("nccl_collnet").value_or(false);
  if (r.has("async_tp_regions")) {
    const std::string which = r.string("async_tp_regions");
    if (which != "micro_pipeline" && which != "every")
      fail_at(r.child_path("async_tp_regions"), fmt::format("unknown choice \"{}\" (micro_pipeline or every)", which));
    sw.async_tp_every_region = which == "every";
  }
  if (r.has("clock")) {
    const std::string clock = r.string("clock");
    if (clock != "sustained" && clock != "burst") fail_at(r.child_path("clock"), fmt::format("unknown clock \"{}\" (sustained or burst)", clock));
    sw.burst_clock = clock == "burst";
  }
  if (r.has("l2")) {
    const std::string l2 = r.string("l2");
    const auto start = parse_l2_start(l2);
    if (!start) fail_at(r.child_path("l2"), fmt::format("unknown L2 state \"{}\" (back_to_back, clean or dirty)", l2));
    sw.l2_start = *start;
  }
  if (r.has("gemm_choice")) {
    const std::string choice = r.string("gemm_choice");
    if (choice != "library" && choice != "fastest")
      fail_at(r.child_path("gemm_choice"), fmt::format("unknown GEMM choice \"{}\" (library or fastest)", choice));
    sw.fastest_gemm = choice == "fastest";
  }
  return sw;
}

}  // namespace

std::int64_t bounded_dimension(const ObjectReader& w, const std::string& key) {
  const std::int64_t v = w.positive_int(key);
  if (v > kMaxDimension) fail_at(w.child_path(key), fmt::format("{} is larger than the limit {}", v, kMaxDimension));
  return v;
}

void check_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& path, std::int64_t batch) {
  const std::pair<std::int64_t, std::int64_t> operands[] = {{m, k}, {k, n}, {m, n}};
  const std::string times = batch > 1 ? fmt::format("{} x ", batch) : "";
  for (auto [rows, cols] : operands) {
    const double elements = static_cast<double>(batch) * static_cast<double>(rows) * static_cast<double>(cols);
    if (elements > kMaxMatrixElements)
      fail_at(path, fmt::format("a {}{} x {} operand ({:.3g} elements) is larger than any GPU memory holds (limit 2^36 elements)", times,
                                rows, cols, elements));
  }
}

HardwareSpec HardwareCache::get(const std::string& ref, const std::string& base_dir) {
  const auto key = std::make_pair(ref, base_dir);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  }
  HardwareSpec hw = resolve_hardware(ref, "$.hardware", base_dir);
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_.emplace(key, std::move(hw)).first->second;
}

Scenario parse_scenario(const Json& j, const std::string& base_dir, HardwareCache* cache) {
  if (j.is_object() && j.contains("axes") && j.contains("base"))
    fail_at("$", "this is a sweep file (it has \"base\" and \"axes\"): run it with tpsim sweep");
  const ObjectReader root(j, "$", {"name", "hardware", "gpus", "dtype", "workload", "variants", "software"});
  Scenario s;
  s.name = root.optional_string("name").value_or("");
  // The workload kind bounds the GPUs: a training step simulates one rank per pipeline stage,
  // so its mesh may be a whole cluster; other workloads simulate every GPU of one TP group.
  const WorkloadKind* kind = workload_kind_named_in(root.at("workload"));
  const int max_gpus = kind ? kind->max_gpus : kMaxClusterGpus;
  s.gpus = static_cast<int>(std::min<std::int64_t>(root.positive_int("gpus"), max_gpus + 1));
  if (s.gpus > max_gpus)
    fail_at("$.gpus", kind && kind->whole_step ? fmt::format("more than {} GPUs is not supported", max_gpus)
                                               : fmt::format("more than {} GPUs in one TP group is not supported", max_gpus));
  const std::string dtype = root.string("dtype");
  const auto d = parse_dtype(dtype);
  if (!d) fail_at("$.dtype", fmt::format("unknown dtype \"{}\" (supported: bf16, fp16, fp32, fp8)", dtype));
  s.dtype = *d;
  s.workload_json = root.at("workload");
  s.workload = parse_workload(s.workload_json, "$.workload", s.gpus);
  if (root.has("variants")) {
    const Json& vs = root.array("variants");
    if (vs.empty()) fail_at("$.variants", "must name at least one variant");
    const auto known = workload_kind(s.workload).variants(s.workload);
    for (std::size_t i = 0; i < vs.size(); ++i) {
      const std::string path = fmt::format("$.variants[{}]", i);
      const std::string v = as_string(vs[i], path);
      if (!supports(s, v)) {
        const bool no_sp = !s.workload.sequence_parallel;
        std::string msg = fmt::format("variant \"{}\" is not available for {}{}", v, s.workload.op,
                                      no_sp ? " without sequence parallelism (its TP regions are all-reduces)" : "");
        if (auto sug = closest_match(v, known)) msg += fmt::format(" (did you mean \"{}\"?)", *sug);
        else msg += fmt::format(" (available: {})", fmt::join(known, ", "));
        fail_at(path, msg);
      }
      if (std::find(s.variants.begin(), s.variants.end(), v) != s.variants.end())
        fail_at(path, fmt::format("variant \"{}\" is listed twice", v));
      s.variants.push_back(v);
    }
  } else {
    s.variants = workload_kind(s.workload).variants(s.workload);
  }
  if (root.has("software"))
    s.software = parse_software(root.object("software", {"symm_mem_reduction", "op_issue", "nccl_nvls", "nccl_collnet", "async_tp_regions", "clock", "gemm_choice", "l2"}));
  s.hardware_ref = root.string("hardware");
  s.hardware = cache ? cache->get(s.hardware_ref, base_dir) : resolve_hardware(s.hardware_ref, "$.hardware", base_dir);
  if (!s.hardware.computes(s.dtype)) fail_at("$.dtype", missing_dtype_message(s.hardware, s.dtype));
  if (s.software.nccl_collnet && !s.hardware.cluster.sharp.available())
    fail_at("$.software.nccl_collnet", fmt::format("hardware {} has no in-network reduction between nodes (cluster.sharp)", s.hardware.name));
  if (s.software.burst_clock) {
    if (is_training_step(s.workload))
      fail_at("$.software.clock", "a training step runs at the sustained clock: its steps outlast the power limit's averaging, a burst does not");
    if (s.hardware.power.burst_speed <= 0)
      fail_at("$.software.clock", fmt::format("hardware {} gives no power.burst_speed (its tensor cores' speed at the clock ceiling)", s.hardware.name));
  }
  if (s.software.l2_start != L2Start::back_to_back) {
    if (is_training_step(s.workload))
      fail_at("$.software.l2", "a training step's kernels each find what the ones before them left, not a benchmark's flush");
    if (s.hardware.memory.l2_dirty_bytes <= 0)
      fail_at("$.software.l2", fmt::format("hardware {} gives no memory.l2_capacity and l2_dirty_share", s.hardware.name));
  }
  s.hardware = run_by(std::move(s.hardware), s.software);
  s.notes = workload_kind(s.workload).check_hardware(s, root.has("variants"));
  if (s.hardware.power.burst)
    s.notes.push_back(fmt::format("timed as a burst: {}'s tensor cores at the clock ceiling, {:.3f} of the rate its GEMM parameters were measured at",
                                  s.hardware.name, s.hardware.power.burst_speed));
  else if (s.hardware.power.tensor_speed() < 1.0)
    s.notes.push_back(fmt::format("{}'s {:g} W limit holds its tensor cores at {:.3f} of the rate its GEMM parameters were measured at "
                                  "({:g} W drawn back to back; power.speed_power_exponent {:g})",
                                  s.hardware.name, s.hardware.power.limit_w, s.hardware.power.tensor_speed(),
                                  s.hardware.power.tensor_sustained_w, s.hardware.power.speed_power_exponent));
  return s;
}

Scenario load_scenario_file(const std::string& file) {
  const Json j = read_json_file(file);
  try {
    return parse_scenario(j, std::filesystem::path(file).parent_path().string());
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
}

}  // namespace tpsim
