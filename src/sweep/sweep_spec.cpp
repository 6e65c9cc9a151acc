#include "tpsim/sweep/sweep_spec.hpp"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "tpsim/io/duplicate_keys.hpp"
#include "tpsim/io/relative_path.hpp"

namespace tpsim {

namespace {

using OrderedJson = nlohmann::ordered_json;

// Values of a {"from", "to", "mul" | "step"} range, refusing before it grows past the limit.
std::vector<Json> expand_range(const OrderedJson& r, const std::string& path) {
  const Json plain = Json::parse(r.dump());
  const bool mul = plain.contains("mul");
  const ObjectReader o(plain, path, {"from", "to", mul ? "mul" : "step"});
  if (!o.has("mul") && !o.has("step")) fail_at(path, "a range needs \"mul\" or \"step\"");
  const std::int64_t from = o.positive_int("from"), to = o.positive_int("to");
  if (from > to) fail_at(path, fmt::format("empty range: from {} is past to {}", from, to));
  std::vector<Json> values;
  if (mul) {
    const std::int64_t f = o.positive_int("mul");
    if (f < 2) fail_at(o.child_path("mul"), "must be at least 2");
    for (std::int64_t v = from;; v *= f) {  // stops before v * f could pass `to` (or overflow)
      values.push_back(v);
      if (v > to / f) break;
    }
  } else {
    const std::int64_t step = o.positive_int("step");
    const std::int64_t count = (to - from) / step + 1;
    if (count > kMaxSweepPoints)
      fail_at(path, fmt::format("{} values: more than the {} points a sweep may have", count, kMaxSweepPoints));
    for (std::int64_t i = 0; i < count; ++i) values.push_back(from + i * step);  // never past `to`: no overflow
  }
  return values;
}

// Sets a dotted path in a scenario document, creating objects on the way.
void set_field(Json& doc, const std::string& field, const Json& value) {
  Json* cur = &doc;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = field.find('.', start);
    const std::string key = field.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      (*cur)[key] = value;
      return;
    }
    if (!cur->contains(key) || !(*cur)[key].is_object()) (*cur)[key] = Json::object();
    cur = &(*cur)[key];
    start = dot + 1;
  }
}

}  // namespace

std::string fingerprint_of(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across machines and builds
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

std::vector<std::string> sweepable_fields() {
  return {"name", "hardware", "gpus", "dtype", "variants", "workload.op", "workload.m", "workload.k", "workload.n",
          "workload.model", "workload.tokens", "workload.seq_len", "workload.pass", "workload.layers",
          "workload.model.hidden", "workload.model.ffn_hidden", "workload.model.heads", "workload.model.kv_heads",
          "workload.model.head_dim", "software.symm_mem_reduction", "software.op_issue", "software.nccl_nvls", "software.nccl_collnet", "software.async_tp_regions", "software.clock", "software.gemm_choice",
          // training steps
          "workload.local_batch", "workload.mesh", "workload.mesh.dp", "workload.mesh.fsdp", "workload.mesh.tp", "workload.mesh.pp", "workload.mesh.cp", "workload.cp_method", "workload.mesh.ep", "workload.expert_load_skew", "workload.expert_load", "workload.moe_dispatch_chunks", "workload.moe_all_to_all", "workload.moe_node_limit", "workload.moe_dispatch_dtype", "workload.expert_gemm",
          "workload.mesh_order", "workload.activation_checkpoint", "workload.pp_schedule", "workload.microbatches",
          "workload.virtual_stages", "workload.linear_dtype", "workload.compile", "workload.grad_reduce_dtype",
          "workload.attention", "workload.attention_dropout", "workload.pp_p2p", "workload.pp_runtime", "workload.sequence_parallel", "workload.tp_weight_grad_input", "workload.activation_layout",
          "workload.fsdp_fp8_all_gather", "workload.fsdp_fp8_precompute_scale", "workload.tp_fp8_all_gather", "workload.fp8_recipe",
          "workload.fp8_rowwise_gemm",
          "workload.pp_first_stage_less_layers", "workload.pp_last_stage_less_layers",
          "workload.model.layers", "workload.model.vocab", "workload.cross_entropy", "workload.loss_parallel", "workload.loss_chunks", "workload.elementwise", "workload.norm", "workload.optimizer",
          "workload.model.q_lora_rank", "workload.model.kv_lora_rank", "workload.model.rope_head_dim", "workload.model.v_head_dim",
          "workload.model.experts", "workload.model.top_k", "workload.model.expert_ffn_hidden", "workload.model.shared_experts"};
}

std::int64_t SweepSpec::points() const {
  std::int64_t n = 1;
  for (const auto& a : axes) n *= static_cast<std::int64_t>(a.values.size());
  return n;
}

std::vector<Json> SweepSpec::values_of(std::int64_t point) const {
  std::vector<Json> out(axes.size());
  for (std::size_t i = axes.size(); i-- > 0;) {
    const auto n = static_cast<std::int64_t>(axes[i].values.size());
    out[i] = axes[i].values[static_cast<std::size_t>(point % n)];
    point /= n;
  }
  return out;
}

Json SweepSpec::scenario_of(std::int64_t point) const {
  Json doc = base;
  const auto values = values_of(point);
  for (std::size_t i = 0; i < axes.size(); ++i) set_field(doc, axes[i].field, values[i]);
  return doc;
}

SweepSpec parse_sweep(const std::string& text, const std::string& dir) {
  OrderedJson doc;
  try {
    doc = parse_rejecting_duplicate_keys<OrderedJson>(text);
  } catch (const OrderedJson::exception& e) {  // parse_error, and out_of_range for numbers too big for a double
    const std::string what = e.what();
    const auto pos = what.find("] ");
    throw InputError(fmt::format("malformed JSON: {}", pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  const Json plain = Json::parse(doc.dump());
  const ObjectReader root(plain, "$", {"base", "axes"});
  SweepSpec spec;
  spec.base_dir = dir;
  const Json& base = root.at("base");
  if (base.is_string()) {
    const std::filesystem::path p = resolve_relative(base.get<std::string>(), dir);
    if (!std::filesystem::exists(p))
      fail_at("$.base", fmt::format("scenario file \"{}\" not found (as {})", base.get<std::string>(), p.string()));
    spec.base = read_json_file(p.string());
    spec.base_dir = p.parent_path().string();
  } else if (base.is_object()) {
    spec.base = base;
  } else {
    fail_at("$.base", "must be a scenario object or the path of a scenario file");
  }
  if (!doc.contains("axes") || !doc["axes"].is_object() || doc["axes"].empty())
    fail_at("$.axes", "must be an object with at least one axis");
  const auto fields = sweepable_fields();
  double total = 1;
  for (const auto& [field, def] : doc["axes"].items()) {
    const std::string path = fmt::format("$.axes[\"{}\"]", field);
    if (std::find(fields.begin(), fields.end(), field) == fields.end()) {
      std::string msg = fmt::format("unknown scenario field \"{}\"", field);
      if (auto s = closest_match(field, fields)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
      fail_at(path, msg);
    }
    SweepAxis axis{field, {}};
    if (def.is_array()) {
      if (def.empty()) fail_at(path, "empty list of values");
      for (const auto& v : def) axis.values.push_back(Json::parse(v.dump()));
    } else if (def.is_object()) {
      axis.values = expand_range(def, path);
    } else {
      fail_at(path, "must be a list of values or a range {\"from\", \"to\", \"mul\" | \"step\"}");
    }
    total *= static_cast<double>(axis.values.size());
    if (total > static_cast<double>(kMaxSweepPoints))
      fail_at(path, fmt::format("the sweep would have more than {} points", kMaxSweepPoints));
    spec.axes.push_back(std::move(axis));
  }
  Json identity{{"base", spec.base}, {"axes", Json::array()}};
  for (const auto& a : spec.axes) identity["axes"].push_back({a.field, a.values});
  spec.fingerprint = fingerprint_of(identity.dump());
  return spec;
}

SweepSpec load_sweep_file(const std::string& file) {
  const std::string text = read_input_file(file);
  try {
    SweepSpec spec = parse_sweep(text, std::filesystem::path(file).parent_path().string());
    spec.file = file;
    return spec;
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
}

std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const auto& x : v) parts.push_back(value_text(x));
    return fmt::format("{}", fmt::join(parts, "+"));
  }
  return v.dump();
}

}  // namespace tpsim
