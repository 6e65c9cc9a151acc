#include <filesystem>

#include <fmt/format.h>

#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/strategies/registry.hpp"

namespace tpsim {

namespace {

std::int64_t dimension(const ObjectReader& w, const std::string& key) {
  const std::int64_t v = w.positive_int(key);
  if (v > kMaxDimension) fail_at(w.child_path(key), fmt::format("{} is larger than the limit {}", v, kMaxDimension));
  return v;
}

Workload parse_workload(const Json& j, const std::string& path, int gpus) {
  if (!j.is_object()) fail_at(path, fmt::format("must be an object, got {}", j.type_name()));
  if (!j.contains("op")) fail_at(path, "missing required key \"op\"");
  const std::string op = as_string(j["op"], path + ".op");
  const auto ops = workload_ops();
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
    std::string msg = fmt::format("unknown op \"{}\"", op);
    if (auto s = closest_match(op, ops)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
    else msg += fmt::format(" (supported: {})", fmt::join(ops, ", "));
    fail_at(path + ".op", msg);
  }
  const ObjectReader w(j, path, {"op", "m", "k", "n"});
  Workload wl{op, dimension(w, "m"), dimension(w, "k"), {}};
  if (w.has("n") && w.at("n").is_array()) {
    if (op != "allgather_matmul") fail_at(w.child_path("n"), fmt::format("a list of n (several weights) is only for allgather_matmul"));
    const Json& ns = w.at("n");
    if (ns.empty() || ns.size() > 16) fail_at(w.child_path("n"), "must list 1 to 16 weights");
    for (std::size_t i = 0; i < ns.size(); ++i) {
      const std::string p = fmt::format("{}[{}]", w.child_path("n"), i);
      const std::int64_t v = as_positive_int(ns[i], p);
      if (v > kMaxDimension) fail_at(p, fmt::format("{} is larger than the limit {}", v, kMaxDimension));
      wl.n.push_back(v);
    }
  } else {
    wl.n.push_back(dimension(w, "n"));
  }
  if (op == "matmul") return wl;
  if (gpus < 2) fail_at("$.gpus", fmt::format("{} needs at least 2 GPUs", op));
  if (wl.m % gpus != 0)
    fail_at(w.child_path("m"), fmt::format("{} rows do not divide evenly over {} GPUs", wl.m, gpus));
  return wl;
}

}  // namespace

Scenario parse_scenario(const Json& j, const std::string& base_dir) {
  const ObjectReader root(j, "$", {"name", "hardware", "gpus", "dtype", "workload", "variants"});
  Scenario s;
  s.name = root.optional_string("name").value_or("");
  s.gpus = static_cast<int>(std::min<std::int64_t>(root.positive_int("gpus"), kMaxGpus + 1));
  if (s.gpus > kMaxGpus) fail_at("$.gpus", fmt::format("more than {} GPUs in one TP group is not supported", kMaxGpus));
  const std::string dtype = root.string("dtype");
  const auto d = parse_dtype(dtype);
  if (!d) fail_at("$.dtype", fmt::format("unknown dtype \"{}\" (supported: bf16, fp16, fp32, fp8)", dtype));
  s.dtype = *d;
  s.workload_json = root.at("workload");
  s.workload = parse_workload(s.workload_json, "$.workload", s.gpus);
  if (root.has("variants")) {
    const Json& vs = root.array("variants");
    if (vs.empty()) fail_at("$.variants", "must name at least one variant");
    const auto known = variants_for(s.workload.op);
    for (std::size_t i = 0; i < vs.size(); ++i) {
      const std::string path = fmt::format("$.variants[{}]", i);
      const std::string v = as_string(vs[i], path);
      if (!supports(s.workload.op, v)) {
        std::string msg = fmt::format("variant \"{}\" is not available for {}", v, s.workload.op);
        if (auto sug = closest_match(v, known)) msg += fmt::format(" (did you mean \"{}\"?)", *sug);
        else msg += fmt::format(" (available: {})", fmt::join(known, ", "));
        fail_at(path, msg);
      }
      if (std::find(s.variants.begin(), s.variants.end(), v) != s.variants.end())
        fail_at(path, fmt::format("variant \"{}\" is listed twice", v));
      s.variants.push_back(v);
    }
  } else {
    s.variants = variants_for(s.workload.op);
  }
  s.hardware_ref = root.string("hardware");
  s.hardware = resolve_hardware(s.hardware_ref, "$.hardware", base_dir);
  if (s.hardware.peak_flops_per_ps[static_cast<int>(s.dtype)] <= 0)
    fail_at("$.dtype", fmt::format("hardware {} has no {} math (its compute.peak_dense lacks it)", s.hardware.name, dtype));
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
