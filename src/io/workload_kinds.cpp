#include "tpsim/io/workload_kinds.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"
#include "tpsim/io/model_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/io/training_step_loader.hpp"
#include "tpsim/step/group_layout.hpp"
#include "tpsim/strategies/registry.hpp"

namespace tpsim {

namespace {

// m x k times k x n; a list of n (Q, K, V sharing one gather) where `several_n`.
Workload parse_gemm_dims(const ObjectReader& w, bool several_n) {
  Workload wl;
  wl.m = bounded_dimension(w, "m");
  wl.k = bounded_dimension(w, "k");
  if (w.has("n") && w.at("n").is_array()) {
    if (!several_n) fail_at(w.child_path("n"), "a list of n (several weights) is only for allgather_matmul");
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
  return wl;
}

Workload parse_matmul(const ObjectReader& w, int) { return parse_gemm_dims(w, false); }

// A TP region: rows are sharded over the group.
Workload parse_region(const ObjectReader& w, int gpus, bool several_n) {
  Workload wl = parse_gemm_dims(w, several_n);
  if (w.has("emulated_group")) {
    const std::string p = w.child_path("emulated_group");
    const std::int64_t g = w.positive_int("emulated_group");
    if (gpus != 1) fail_at(p, fmt::format("emulates one rank of a group on one GPU, so \"gpus\" must be 1 (got {})", gpus));
    if (g < 2 || g > kMaxGpus) fail_at(p, fmt::format("must be 2 to {} (the group one rank of which runs here), got {}", kMaxGpus, g));
    wl.emulated_group = static_cast<int>(g);
    if (wl.m % g != 0) fail_at(w.child_path("m"), fmt::format("{} rows do not divide evenly over a group of {}", wl.m, g));
    return wl;
  }
  if (wl.m % gpus != 0) fail_at(w.child_path("m"), fmt::format("{} rows do not divide evenly over {} GPUs", wl.m, gpus));
  return wl;
}
Workload parse_allgather_matmul(const ObjectReader& w, int gpus) { return parse_region(w, gpus, true); }
Workload parse_matmul_reducescatter(const ObjectReader& w, int gpus) { return parse_region(w, gpus, false); }
// Every rank ends with the whole output: nothing is split by rows.
Workload parse_matmul_allreduce(const ObjectReader& w, int) { return parse_gemm_dims(w, false); }
// Each rank's m rows go out in G equal shares.
Workload parse_alltoall_matmul(const ObjectReader& w, int gpus) { return parse_region(w, gpus, false); }

Workload parse_layers(const ObjectReader& w, int gpus) {
  Workload wl;
  wl.model = parse_model(w, false);
  wl.tokens = bounded_dimension(w, "tokens");
  wl.seq_len = bounded_dimension(w, "seq_len");
  const std::string pass = w.has("pass") ? w.string("pass") : "forward";
  if (pass == "forward") wl.pass = Pass::forward;
  else if (pass == "backward") wl.pass = Pass::backward;
  else if (pass == "forward_backward") wl.pass = Pass::forward_backward;
  else fail_at(w.child_path("pass"), fmt::format("unknown pass \"{}\" (forward, backward or forward_backward)", pass));
  wl.sequence_parallel = w.optional_bool("sequence_parallel").value_or(true);
  wl.tp_saves_gathered_input = parse_tp_weight_grad_input(w);
  wl.batch_first = parse_activation_layout(w);
  wl.attention = parse_attention_choice(w);  // ffn's table keys leave these out: flash, unused
  if (wl.model.is_mla() && wl.attention.impl == AttentionImpl::unfused)
    fail_at(w.child_path("attention"), "\"unfused\" is not modelled for multi-head latent attention");
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

Workload parse_step(const ObjectReader& w, int gpus) {
  Workload wl;
  wl.step = parse_training_step(w, gpus);
  wl.sequence_parallel = wl.step.sequence_parallel;  // the TP group's layers (variants, messages)
  wl.attention = wl.step.attention;
  return wl;
}

std::vector<std::string> baseline_only(const Workload&) { return {"baseline"}; }
std::vector<std::string> gather_variants(const Workload&) { return tp_variants(RegionKind::gather); }
std::vector<std::string> scatter_variants(const Workload&) { return tp_variants(RegionKind::scatter); }
std::vector<std::string> all_reduce_variants(const Workload&) { return tp_variants(RegionKind::all_reduce); }
std::vector<std::string> all_to_all_variants(const Workload&) { return tp_variants(RegionKind::all_to_all); }
// Layers: without sequence parallelism every TP region is an all-reduce.
std::vector<std::string> layer_variants(const Workload& w) {
  return tp_variants(w.sequence_parallel ? RegionKind::gather : RegionKind::all_reduce);
}

Dag build_matmul(const Scenario& s, const std::string&) { return build_matmul_dag(s); }
Dag build_gather(const Scenario& s, const std::string& v) { return build_region_dag(s, v, RegionKind::gather); }
Dag build_scatter(const Scenario& s, const std::string& v) { return build_region_dag(s, v, RegionKind::scatter); }
Dag build_all_reduce(const Scenario& s, const std::string& v) { return build_region_dag(s, v, RegionKind::all_reduce); }
Dag build_all_to_all(const Scenario& s, const std::string& v) { return build_region_dag(s, v, RegionKind::all_to_all); }

// Keeps the variants `fits` accepts: one it rejects is refused when listed (naming `why`),
// left out with a note by default.
template <class Fits>
void keep_variants(Scenario& s, bool variants_listed, Fits fits, const std::string& why, const std::string& note,
                   std::vector<std::string>& notes) {
  std::vector<std::string> kept, dropped;
  for (std::size_t i = 0; i < s.variants.size(); ++i) {
    const std::string& v = s.variants[i];
    if (fits(v)) {
      kept.push_back(v);
      continue;
    }
    if (variants_listed) fail_at(fmt::format("$.variants[{}]", i), fmt::format("{} {}", v, why));
    dropped.push_back(v);
  }
  if (!dropped.empty()) notes.push_back(fmt::format("left out {} ({})", fmt::join(dropped, ", "), note));
  s.variants = std::move(kept);
}

// A TP group across nodes keeps only the variants that reach peers through NCCL: one that
// maps peers' memory over NVLink is refused when listed, left out with a note by default.
void keep_variants_across_nodes(Scenario& s, bool variants_listed, const std::string& where, std::vector<std::string>& notes) {
  keep_variants(s, variants_listed, [](const std::string& v) { return !variant_needs_one_node(v); },
                fmt::format("maps its peers' memory over NVLink, so its group must sit in one node; {}", where),
                "peers' memory mapped over NVLink: one node only", notes);
}

// One TP group: one node, unless the hardware model joins nodes; then only the variants
// that reach peers through NCCL (not through memory mapped over NVLink).
std::vector<std::string> check_tp_group_hardware(Scenario& s, bool variants_listed) {
  check_attention_hardware(s.workload.attention, s.hardware);
  if (s.workload.emulated_group > 0) {
    std::vector<std::string> notes;
    keep_variants(s, variants_listed, variant_emulates_one_rank,
                  "has no emulation of one rank of a group (async_tp and async_tp_single_stream have)", "no one-rank emulation", notes);
    return notes;
  }
  if (s.gpus == 1) {
    std::vector<std::string> notes;
    keep_variants(s, variants_listed, variant_runs_on_one_gpu, "has no form for a group of one GPU (baseline and async_tp have)",
                  "no form for one GPU", notes);
    return notes;
  }
  const FabricSpec& fabric = s.hardware.fabric;
  if (fabric.topology != "multi_node" && s.gpus > fabric.gpus_per_node)
    fail_at("$.gpus", fmt::format("{} is one node of {} GPUs (topology \"{}\"); {} GPUs need a multi_node hardware model such as "
                                  "h100_sxm_2node", s.hardware.name, fabric.gpus_per_node, fabric.topology, s.gpus));
  if (fabric.topology != "multi_node") return {};
  const int nodes = (s.gpus + fabric.gpus_per_node - 1) / fabric.gpus_per_node;
  std::vector<std::string> notes{fmt::format("{} GPUs on {}: {} node(s) of up to {} GPUs, one NIC per GPU between nodes", s.gpus,
                                             s.hardware.name, nodes, fabric.gpus_per_node)};
  if (nodes > 1) keep_variants_across_nodes(s, variants_listed, fmt::format("these {} GPUs span {} nodes", s.gpus, nodes), notes);
  return notes;
}

std::vector<std::string> check_step_hardware(Scenario& s, bool variants_listed) {
  std::vector<std::string> notes = check_training_hardware(s.workload.step, s.gpus, s.hardware);
  const TrainingStepSpec& t = s.workload.step;
  const GroupLayout tp = group_layout(t.mesh, MeshDim::tp, s.hardware.fabric.gpus_per_node, 0);
  if (tp.crosses_nodes())
    keep_variants_across_nodes(s, variants_listed, fmt::format("each TP group spans {} nodes", tp.nodes), notes);
  return notes;
}

// The FFN half has no attention, so its keys leave out the attention choice.
const std::vector<std::string> kFfnKeys = {"model", "tokens", "seq_len", "pass", "layers", "sequence_parallel", "tp_weight_grad_input",
                                           "activation_layout"};
const std::vector<std::string> kLayerKeys = {"model", "tokens", "seq_len", "pass", "layers", "sequence_parallel", "tp_weight_grad_input",
                                             "activation_layout", "attention", "attention_dropout"};
const std::vector<std::string> kGemmKeys = {"m", "k", "n"};
const std::vector<std::string> kRegionKeys = {"m", "k", "n", "emulated_group"};

}  // namespace

const std::vector<WorkloadKind>& workload_kinds() {
  static const std::vector<WorkloadKind> table = {
      {"matmul", "one GEMM (m x k by k x n) on every GPU, nothing shared", kGemmKeys, 1, kMaxGpus, false, true, parse_matmul,
       baseline_only, build_matmul, nullptr, check_tp_group_hardware},
      {"allgather_matmul", "all-gather of an m/gpus-row shard, then its GEMMs (n: one weight or a list sharing the gather)",
       kRegionKeys, 1, kMaxGpus, false, true, parse_allgather_matmul, gather_variants, build_gather, nullptr, check_tp_group_hardware},
      {"matmul_reducescatter", "a GEMM's partial output, reduce-scattered by rows", kRegionKeys, 1, kMaxGpus, false, true,
       parse_matmul_reducescatter, scatter_variants, build_scatter, nullptr, check_tp_group_hardware},
      {"matmul_allreduce", "a GEMM's partial output (k is each GPU's contraction shard), all-reduced: TP without sequence parallelism",
       kGemmKeys, 1, kMaxGpus, false, true, parse_matmul_allreduce, all_reduce_variants, build_all_reduce, nullptr,
       check_tp_group_hardware},
      {"alltoall_matmul", "expert parallelism: each GPU's m rows all-to-all to the GPU of their expert (uniform routing, one expert per "
       "GPU), the expert's GEMM [m, k] x [k, n], and the products all-to-all back", kGemmKeys, 2, kMaxGpus, false, false,
       parse_alltoall_matmul, all_to_all_variants, build_all_to_all, nullptr, check_tp_group_hardware},
      {"transformer_layer", "Llama decoder layers under TP (with SP unless sequence_parallel is false): attention and FFN, forward and/or backward", kLayerKeys, 2, kMaxGpus,
       false, false, parse_layers, layer_variants, build_layer_dag, check_layer_op_budget, check_tp_group_hardware},
      {"ffn", "the FFN half of decoder layers under TP", kFfnKeys, 2, kMaxGpus, false, false, parse_layers, layer_variants,
       build_layer_dag, check_layer_op_budget, check_tp_group_hardware},
      {"attention", "the attention half of decoder layers under TP", kLayerKeys, 2, kMaxGpus, false, false, parse_layers,
       layer_variants, build_layer_dag, check_layer_op_budget, check_tp_group_hardware},
      {"training_step", "a whole training step on a device mesh (dp, fsdp, tp, pp, cp, ep); variants pick the TP strategy",
       training_step_keys(), 1, kMaxClusterGpus, true, false, parse_step, layer_variants, nullptr, nullptr, check_step_hardware},
  };
  return table;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> out;
  for (const auto& k : workload_kinds()) out.emplace_back(k.name);
  return out;
}

const WorkloadKind* find_workload_kind(std::string_view name) {
  for (const auto& k : workload_kinds())
    if (k.name == name) return &k;
  return nullptr;
}

const WorkloadKind* workload_kind_named_in(const Json& workload) {
  if (!workload.is_object() || !workload.contains("op") || !workload["op"].is_string()) return nullptr;
  return find_workload_kind(workload["op"].get<std::string>());
}

const WorkloadKind& workload_kind(const Workload& w) {
  const WorkloadKind* k = find_workload_kind(w.op);
  if (!k) throw std::logic_error("no workload kind " + w.op);
  return *k;
}

bool is_training_step(const Workload& w) { return workload_kind(w).whole_step; }

Workload parse_workload(const Json& j, const std::string& path, int gpus) {
  if (!j.is_object()) fail_at(path, fmt::format("must be an object, got {}", j.type_name()));
  if (!j.contains("op")) fail_at(path, "missing required key \"op\"");
  const std::string op = as_string(j["op"], path + ".op");
  const WorkloadKind* kind = find_workload_kind(op);
  if (!kind) {
    const auto ops = workload_names();
    std::string msg = fmt::format("unknown op \"{}\"", op);
    if (auto s = closest_match(op, ops)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
    else msg += fmt::format(" (supported: {})", fmt::join(ops, ", "));
    fail_at(path + ".op", msg);
  }
  if (gpus < kind->min_gpus) fail_at("$.gpus", fmt::format("{} needs at least {} GPUs", op, kind->min_gpus));
  std::vector<std::string> allowed{"op"};
  allowed.insert(allowed.end(), kind->keys.begin(), kind->keys.end());
  Workload wl = kind->parse(ObjectReader(j, path, std::move(allowed)), gpus);
  wl.op = op;
  return wl;
}

bool supports(const Scenario& s, const std::string& variant) {
  const auto v = workload_kind(s.workload).variants(s.workload);
  return std::find(v.begin(), v.end(), variant) != v.end();
}

Dag build_dag(const Scenario& s, const std::string& variant) {
  const WorkloadKind& kind = workload_kind(s.workload);
  if (!kind.build) throw std::logic_error(fmt::format("{} is not one op DAG (it has its own simulator)", kind.name));
  if (!supports(s, variant)) throw std::logic_error(fmt::format("no strategy for {} / {}", kind.name, variant));
  return kind.build(s, variant);
}

void check_op_budget(const Scenario& s) {
  const WorkloadKind& kind = workload_kind(s.workload);
  if (kind.check_budget) kind.check_budget(s);
}

std::string describe_workloads() {
  std::string out;
  for (const auto& k : workload_kinds()) {
    out += fmt::format("{}\n  {}\n", k.name, k.summary);
    out += fmt::format("  keys: op, {}\n", fmt::join(k.keys, ", "));
    out += k.min_gpus > 1 ? fmt::format("  gpus: {} to {}\n", k.min_gpus, k.max_gpus) : fmt::format("  gpus: up to {}\n", k.max_gpus);
    out += fmt::format("  variants: {}\n", fmt::join(k.variants(Workload{}), ", "));
  }
  return out;
}

}  // namespace tpsim
