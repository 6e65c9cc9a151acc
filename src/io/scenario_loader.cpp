#include <filesystem>

#include <fmt/format.h>

#include "tpsim/cost/reduction_cost.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/model_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/io/training_step_loader.hpp"
#include "tpsim/strategies/registry.hpp"

namespace tpsim {

namespace {

Workload parse_layer_workload(const ObjectReader& w, const std::string& op, int gpus) {
  Workload wl;
  wl.op = op;
  wl.model = parse_model(w, false);
  wl.tokens = bounded_dimension(w, "tokens");
  wl.seq_len = bounded_dimension(w, "seq_len");
  const std::string pass = w.has("pass") ? w.string("pass") : "forward";
  if (pass == "forward") wl.pass = Pass::forward;
  else if (pass == "backward") wl.pass = Pass::backward;
  else if (pass == "forward_backward") wl.pass = Pass::forward_backward;
  else fail_at(w.child_path("pass"), fmt::format("unknown pass \"{}\" (forward, backward or forward_backward)", pass));
  const std::int64_t layers = w.positive_int_or("layers", 1);
  if (layers > kMaxLayers) fail_at(w.child_path("layers"), fmt::format("{} layers is more than the limit {}", layers, kMaxLayers));
  wl.layers = static_cast<int>(layers);
  const auto divides = [&](std::int64_t v, const std::string& what, const std::string& p) {
    if (v % gpus != 0) fail_at(p, fmt::format("{} {} do not divide evenly over {} GPUs", v, what, gpus));
  };
  divides(wl.tokens, "tokens", w.child_path("tokens"));
  if (wl.tokens % wl.seq_len != 0)
    fail_at(w.child_path("tokens"), fmt::format("{} tokens are not a whole number of {}-token sequences", wl.tokens, wl.seq_len));
  const std::string mp = w.child_path("model");
  divides(wl.model.heads, "attention heads", mp + ".heads");
  divides(wl.model.ffn_hidden, "FFN columns", mp + ".ffn_hidden");
  const auto kv = wl.model.kv_heads;
  if ((kv >= gpus && kv % gpus != 0) || (kv < gpus && gpus % kv != 0))
    fail_at(mp + ".kv_heads", fmt::format("{} KV heads can be neither split nor replicated evenly over {} GPUs", kv, gpus));
  if (kv > wl.model.heads) fail_at(mp + ".kv_heads", "more KV heads than attention heads");
  // The layer's GEMMs, whole (before TP splits them), must fit a GPU like any given GEMM.
  const ModelShape& md = wl.model;
  const std::int64_t q = md.heads * md.head_dim, qkv = q + 2 * md.kv_heads * md.head_dim;
  for (const auto& [k, n] : {std::pair{md.hidden, qkv}, std::pair{q, md.hidden}, std::pair{md.hidden, 2 * md.ffn_hidden},
                             std::pair{md.ffn_hidden, md.hidden}})
    check_gemm_fits(wl.tokens, n, k, mp);
  return wl;
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
  if (op == "training_step") {
    Workload wl;
    wl.op = op;
    wl.step = parse_training_step(j, path, gpus);
    return wl;
  }
  if (op == "transformer_layer" || op == "ffn" || op == "attention") {
    if (gpus < 2) fail_at("$.gpus", fmt::format("{} needs at least 2 GPUs (a TP group)", op));
    return parse_layer_workload(ObjectReader(j, path, {"op", "model", "tokens", "seq_len", "pass", "layers"}), op, gpus);
  }
  const ObjectReader w(j, path, {"op", "m", "k", "n"});
  Workload wl;
  wl.op = op;
  wl.m = bounded_dimension(w, "m");
  wl.k = bounded_dimension(w, "k");
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
    wl.n.push_back(bounded_dimension(w, "n"));
  }
  for (std::int64_t n : wl.n) check_gemm_fits(wl.m, n, wl.k, w.path());
  if (op == "matmul") return wl;
  if (gpus < 2) fail_at("$.gpus", fmt::format("{} needs at least 2 GPUs", op));
  if (wl.m % gpus != 0)
    fail_at(w.child_path("m"), fmt::format("{} rows do not divide evenly over {} GPUs", wl.m, gpus));
  return wl;
}

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
    if (!issue) fail_at(r.child_path("op_issue"), fmt::format("unknown op issue \"{}\" (compiled, eager or cuda_graph)", how));
    sw.op_issue = *issue;
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
  // A training step simulates one rank per pipeline stage, so its mesh may be a whole cluster.
  const Json& wj = root.at("workload");
  const bool step = wj.is_object() && wj.contains("op") && wj["op"] == "training_step";
  const int max_gpus = step ? kMaxClusterGpus : kMaxGpus;
  s.gpus = static_cast<int>(std::min<std::int64_t>(root.positive_int("gpus"), max_gpus + 1));
  if (s.gpus > max_gpus)
    fail_at("$.gpus", step ? fmt::format("more than {} GPUs is not supported", max_gpus)
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
  if (root.has("software")) s.software = parse_software(root.object("software", {"symm_mem_reduction", "op_issue"}));
  s.hardware_ref = root.string("hardware");
  s.hardware = cache ? cache->get(s.hardware_ref, base_dir) : resolve_hardware(s.hardware_ref, "$.hardware", base_dir);
  if (!s.hardware.computes(s.dtype)) fail_at("$.dtype", missing_dtype_message(s.hardware, s.dtype));
  const FabricSpec& fabric = s.hardware.fabric;
  if (step) {
    s.notes = check_training_hardware(s.workload.step, s.gpus, s.hardware);
    return s;
  }
  if (fabric.topology != "multi_node" && s.gpus > fabric.gpus_per_node)
    fail_at("$.gpus", fmt::format("{} is one node of {} GPUs (topology \"{}\"); {} GPUs need a multi_node hardware model such as "
                                  "h100_sxm_2node", s.hardware.name, fabric.gpus_per_node, fabric.topology, s.gpus));
  if (fabric.topology == "multi_node")
    s.notes.push_back(fmt::format("{} GPUs on {}: {} node(s) of up to {} GPUs, one NIC per GPU between nodes", s.gpus, s.hardware.name,
                                  (s.gpus + fabric.gpus_per_node - 1) / fabric.gpus_per_node, fabric.gpus_per_node));
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
