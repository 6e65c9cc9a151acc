#include "tpsim/calibration/measurement.hpp"

#include <algorithm>
#include <array>
#include <filesystem>

#include <fmt/format.h>

#include "gemm_row.hpp"
#include "tpsim/calibration/kineto_import.hpp"
#include "tpsim/calibration/measurement_dag.hpp"
#include "tpsim/calibration/result_import.hpp"
#include "tpsim/cost/l2_writeback.hpp"
#include "tpsim/cost/reduction_cost.hpp"
#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/io/workload_kinds.hpp"

namespace tpsim {

namespace {

struct KindInfo {
  MeasurementKind kind;
  std::string_view name;
  std::string_view cls;
};

constexpr std::array<KindInfo, 18> kKinds = {{
    {MeasurementKind::gemm, "gemm", "gemm"},
    {MeasurementKind::peer_copy, "peer_copy", "copy"},
    {MeasurementKind::local_copy, "local_copy", "copy"},
    {MeasurementKind::all_gather, "all_gather", "collective"},
    {MeasurementKind::reduce_scatter, "reduce_scatter", "collective"},
    {MeasurementKind::all_reduce, "all_reduce", "collective"},
    {MeasurementKind::all_to_all, "all_to_all", "collective"},
    {MeasurementKind::send_recv, "send_recv", "collective"},
    {MeasurementKind::barrier, "barrier", "barrier"},
    {MeasurementKind::launch, "launch", "launch"},
    {MeasurementKind::gemm_with_peer_copy, "gemm_with_peer_copy", "interference"},
    {MeasurementKind::peer_copy_with_gemm, "peer_copy_with_gemm", "interference"},
    {MeasurementKind::gemm_with_collective, "gemm_with_collective", "interference"},
    {MeasurementKind::gemm_pair, "gemm_pair", "interference"},
    {MeasurementKind::reduction, "reduction", "reduction"},
    {MeasurementKind::scenario, "scenario", "scenario"},
    {MeasurementKind::attention, "attention", "attention"},
    {MeasurementKind::elementwise, "elementwise", "elementwise"},
}};

const KindInfo& info(MeasurementKind k) {
  for (const auto& i : kKinds)
    if (i.kind == k) return i;
  return kKinds[0];
}

bool has_gemm(MeasurementKind k) {
  return k == MeasurementKind::gemm || k == MeasurementKind::gemm_with_peer_copy || k == MeasurementKind::peer_copy_with_gemm ||
         k == MeasurementKind::gemm_with_collective || k == MeasurementKind::gemm_pair;
}
bool is_collective(MeasurementKind k) {
  return k == MeasurementKind::all_gather || k == MeasurementKind::reduce_scatter || k == MeasurementKind::all_reduce ||
         k == MeasurementKind::all_to_all || k == MeasurementKind::send_recv;
}
bool has_bytes(MeasurementKind k) {
  return k == MeasurementKind::peer_copy || k == MeasurementKind::local_copy || is_collective(k) || k == MeasurementKind::gemm_with_peer_copy ||
         k == MeasurementKind::peer_copy_with_gemm || k == MeasurementKind::gemm_with_collective || k == MeasurementKind::reduction;
}
// Kinds whose row may name the vendor kernel that ran (kept for the record).
bool names_kernel(MeasurementKind k) {
  return has_gemm(k) || k == MeasurementKind::elementwise || k == MeasurementKind::reduction;
}
bool has_gpus(MeasurementKind k) {
  return is_collective(k) || k == MeasurementKind::barrier || k == MeasurementKind::gemm_with_collective;
}

MeasurementKind parse_kind(const ObjectReader& r) {
  const std::string s = r.string("kind");
  std::vector<std::string> names;
  for (const auto& i : kKinds) {
    if (i.name == s) return i.kind;
    names.emplace_back(i.name);
  }
  std::string msg = fmt::format("unknown kind \"{}\"", s);
  if (auto c = closest_match(s, names)) msg += fmt::format(" (did you mean \"{}\"?)", *c);
  else msg += fmt::format(" (known: {})", fmt::join(names, ", "));
  fail_at(r.child_path("kind"), msg);
}

std::vector<std::string> allowed_keys(MeasurementKind k) {
  std::vector<std::string> keys = {"kind", "name", "source", "time_us", "weight"};
  if (has_gemm(k)) keys.insert(keys.end(), {"m", "n", "k", "dtype"});
  if (names_kernel(k)) keys.push_back("kernel");
  if (k == MeasurementKind::gemm) keys.insert(keys.end(), {"tflops", "batch", "grouped", "group_sizes", "ragged", "plan", "heuristic_rank", "cluster",
                                                          "scaling", "fast_accumulation"});
  if (has_bytes(k)) keys.push_back("bytes");
  if (k == MeasurementKind::peer_copy || k == MeasurementKind::local_copy || k == MeasurementKind::peer_copy_with_gemm || is_collective(k) ||
      k == MeasurementKind::reduction)
    keys.push_back("gbps");
  if (k == MeasurementKind::reduction) keys.insert(keys.end(), {"partials", "reduction"});
  if (is_collective(k)) keys.insert(keys.end(), {"busbw_gbps", "nccl_nvls"});
  if (has_gpus(k)) keys.insert(keys.end(), {"gpus", "groups"});
  if (k == MeasurementKind::gemm_with_collective) keys.push_back("collective");
  if (k == MeasurementKind::scenario) keys.insert(keys.end(), {"scenario", "variant", "op", "rank"});
  else if (k != MeasurementKind::launch) keys.insert(keys.end(), {"timing", "clock", "l2"});  // a launch row is host to end; a scenario's, its makespan
  if (k == MeasurementKind::elementwise) keys.insert(keys.end(), {"bytes_read", "bytes_written", "elements", "loop", "operands", "dims", "row"});
  if (k == MeasurementKind::attention)
    keys.insert(keys.end(), {"batch", "seq_len", "heads", "kv_heads", "head_dim", "v_head_dim", "causal", "pass", "implementation", "dtype", "tflops"});
  return keys;
}

// Any kind's keys: what a row may hold before its kind says which of them it takes.
std::vector<std::string> every_kind_key() {
  std::vector<std::string> keys;
  for (const auto& i : kKinds)
    for (auto& k : allowed_keys(i.kind))
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
  return keys;
}

// One flash-attention kernel: batch x seq_len tokens (each sequence attends within itself),
// `heads` query heads over `kv_heads` (default: as many), `implementation` the kernel whose
// efficiencies the hardware file gives (`flash`: its newest, `flash2`: FlashAttention-2,
// `cudnn`: cuDNN's fused attention).
AttentionProblem parse_attention_problem(const ObjectReader& r) {
  AttentionProblem a;
  a.seq_len = row_dimension(r, "seq_len");
  const std::int64_t batch = row_dimension(r, "batch");
  if (batch > kMaxDimension / a.seq_len) fail_at(r.child_path("batch"), fmt::format("{} sequences of {} tokens are more than {} tokens", batch, a.seq_len, kMaxDimension));
  a.tokens = batch * a.seq_len;
  a.heads = row_dimension(r, "heads");
  a.kv_heads = r.has("kv_heads") ? row_dimension(r, "kv_heads") : a.heads;
  if (a.kv_heads > a.heads || a.heads % a.kv_heads != 0)
    fail_at(r.child_path("kv_heads"), fmt::format("{} KV heads do not group {} query heads", a.kv_heads, a.heads));
  a.head_dim = row_dimension(r, "head_dim");
  if (r.has("v_head_dim")) a.v_head_dim = row_dimension(r, "v_head_dim");
  if (a.head_dim > 1024 || a.v_dim() > 1024) fail_at(r.path(), "a head wider than 1024 is not a flash-attention shape");
  a.causal = r.optional_bool("causal").value_or(true);
  const std::string pass = r.string("pass");
  if (pass != "forward" && pass != "backward") fail_at(r.child_path("pass"), fmt::format("unknown pass \"{}\" (forward or backward)", pass));
  a.backward = pass == "backward";
  const std::string impl = r.optional_string("implementation").value_or("flash");
  bool known = false;
  for (AttentionKernel k : {AttentionKernel::newest, AttentionKernel::flash2, AttentionKernel::cudnn})
    if (attention_kernel_name(k) == impl) a.kernel = k, known = true;
  if (!known) fail_at(r.child_path("implementation"), fmt::format("unknown implementation \"{}\" (flash, flash2 or cudnn)", impl));
  a.dtype = parse_dtype_at(r);
  // Q (and the output) as large as a GEMM operand may be, and no prediction that overflows
  // the simulator's picoseconds.
  const double q = static_cast<double>(a.tokens) * static_cast<double>(a.heads) * static_cast<double>(std::max(a.head_dim, a.v_dim()));
  if (q > static_cast<double>(kMaxMatrixElements))
    fail_at(r.path(), fmt::format("a query of {:.3g} elements is larger than any GPU memory holds (limit 2^36 elements)", q));
  if (attention_flops(a) > 1e18) fail_at(r.path(), fmt::format("{:.3g} FLOPs is more than the limit 1e18 for one kernel", attention_flops(a)));
  return a;
}

// One element-wise kernel: its traffic and, for ATen's unvectorized loops, its output's elements.
ElementwiseOp parse_elementwise_kernel(const ObjectReader& r) {
  ElementwiseOp e;
  for (const auto& [key, v] : {std::pair{"bytes_read", &e.bytes_read}, std::pair{"bytes_written", &e.bytes_written}}) {
    *v = r.has(key) ? r.positive_number(key) : 0.0;  // absent: none (a fill reads nothing)
    if (*v > 1e15) fail_at(r.child_path(key), "larger than a petabyte");
  }
  if (e.bytes_read + e.bytes_written <= 0) fail_at(r.path(), "moves no bytes: give bytes_read or bytes_written");
  const std::string loop = r.optional_string("loop").value_or("vectorized");
  const auto l = parse_element_loop(loop);
  if (!l) fail_at(r.child_path("loop"), fmt::format("unknown loop \"{}\" (vectorized, cast, strided, index, scatter, cat or row_reduction)", loop));
  e.loop = *l;
  if (r.has("elements")) {
    e.elements = r.positive_number("elements");
    if (e.elements > 1e15) fail_at(r.child_path("elements"), "more than 1e15 elements");
  } else if (e.loop != ElementLoop::vectorized) {
    fail_at(r.child_path("elements"), fmt::format("missing: a {} loop is priced per element", loop));
  }
  if (e.loop == ElementLoop::strided) {
    // The legacy loop computes an offset per operand and element: its cost follows them. Absent
    // (rows written before they were counted): 3, a binary op with a broadcast operand.
    const std::int64_t n = r.has("operands") ? r.positive_int("operands") : 3;
    if (n < 2 || n > 16) fail_at(r.child_path("operands"), "a strided loop's operands: the output and its strided inputs, 2 to 16");
    e.operands = static_cast<int>(n);
    if (r.has("dims")) {  // absent: 2, a broadcast over rows or columns
      const std::int64_t d = r.positive_int("dims");
      if (d < 1 || d > 25) fail_at(r.child_path("dims"), "the offset calculator's dimensions: 1 to 25 (ATen's limit)");
      e.dims = static_cast<int>(d);
    }
  } else {
    for (const char* key : {"operands", "dims"})
      if (r.has(key)) fail_at(r.child_path(key), fmt::format("only a strided loop is priced by its {}", key));
  }
  if (e.loop == ElementLoop::row_reduction) {
    if (!r.has("row")) fail_at(r.child_path("row"), "missing: a row_reduction loop is priced per row (the elements each row holds)");
    e.row = r.positive_number("row");
    if (e.row > e.elements) fail_at(r.child_path("row"), fmt::format("a row of {:.6g} elements is longer than the kernel's {:.6g}", e.row, e.elements));
  } else if (r.has("row")) {
    fail_at(r.child_path("row"), "only a row_reduction loop is priced per row");
  }
  return e;
}

// The scenario of a scenario measurement, errors re-rooted at its JSON path.
std::shared_ptr<const Scenario> parse_nested_scenario(const ObjectReader& r, const std::string& hardware, const std::string& base_dir) {
  Json sj = r.at("scenario");
  const std::string path = r.child_path("scenario");
  if (!sj.is_object()) fail_at(path, "must be an object (a scenario)");
  if (!sj.contains("hardware")) {
    if (hardware.empty()) fail_at(path, "names no \"hardware\" and the file has no top-level \"hardware\"");
    sj["hardware"] = hardware;
  }
  const std::string variant = r.string("variant");
  sj["variants"] = Json::array({variant});
  const WorkloadKind* kind = sj.contains("workload") ? workload_kind_named_in(sj["workload"]) : nullptr;
  if (kind && kind->whole_step)
    fail_at(path + ".workload.op", "a training step is not a measurement row (measure its ops; compare steps with tpsim run)");
  try {
    return std::make_shared<const Scenario>(parse_scenario(sj, base_dir));
  } catch (const InputError& e) {
    std::string msg = e.what();
    if (msg.starts_with("$.variants")) throw InputError(fmt::format("{}: variant \"{}\" does not apply", r.child_path("variant"), variant));
    if (msg.starts_with("$")) msg = path + msg.substr(1);
    throw InputError(msg);
  }
}

double measured_time_us(const ObjectReader& r, const Measurement& m) {
  int given = 0;
  double us = 0;
  if (r.has("time_us")) ++given, us = r.positive_number("time_us");
  // Attention FLOPs as FlashAttention's benchmarks count them (attention_flops: causal halves
  // them, backward is 2.5 forwards).
  const double flops = m.kind == MeasurementKind::attention ? attention_flops(m.attention) : m.gemm.flops();
  if (r.has("tflops")) ++given, us = flops / (r.positive_number("tflops") * 1e12) * 1e6;
  // A reduction's GB/s are of its DRAM traffic (every partial read, the sum written), as
  // pytorch/pytorch PR 191803 reports them.
  const double moved = m.kind == MeasurementKind::reduction ? (m.partials + 1) * m.bytes : m.bytes;
  if (r.has("gbps")) ++given, us = moved / (r.positive_number("gbps") * 1e9) * 1e6;
  // nccl-tests' bus bandwidth: (n-1)/n of the bytes cross each rank's link, twice for an
  // all-reduce; a send/recv's is its algorithm bandwidth (sendrecv_perf).
  const double bus_factor = m.kind == MeasurementKind::send_recv ? 1.0
                            : (m.kind == MeasurementKind::all_reduce ? 2.0 : 1.0) * (m.gpus - 1) / m.gpus;
  if (r.has("busbw_gbps")) ++given, us = m.bytes * bus_factor / (r.positive_number("busbw_gbps") * 1e9) * 1e6;
  if (given != 1) {
    std::string choices = "time_us";
    if (m.kind == MeasurementKind::gemm || m.kind == MeasurementKind::attention) choices += " or tflops";
    if (r.has("bytes") && m.kind != MeasurementKind::gemm_with_peer_copy && m.kind != MeasurementKind::gemm_with_collective)
      choices += " or gbps";
    fail_at(r.path(), fmt::format("give exactly one measured value ({}), got {}", choices, given));
  }
  // A GPU op takes from a few ns to seconds; outside that the row is a typo or wrong units.
  if (!(us >= 1e-3 && us <= 1e9))
    fail_at(r.path(), fmt::format("the measured time is {:.3g} us, outside 0.001 us to 1000 s: a typo or the wrong unit?", us));
  return us;
}

std::string default_name(const Measurement& m) {
  const std::string_view kind = measurement_kind_name(m.kind);
  std::string shape = fmt::format("{}x{}x{} {}", m.gemm.m, m.gemm.n, m.gemm.k, dtype_name(m.gemm.dtype));
  const std::string at_once = m.groups > 1 ? fmt::format(" ({} groups at once)", m.groups) : "";
  if (m.gemm.batch > 1) shape += fmt::format(" batch {}", m.gemm.batch);
  switch (m.kind) {
    case MeasurementKind::gemm: return fmt::format("gemm {}", shape);
    case MeasurementKind::peer_copy:
    case MeasurementKind::local_copy: return fmt::format("{} {:.0f} B", kind, m.bytes);
    case MeasurementKind::elementwise:
      return fmt::format("elementwise {} {:.0f} B read {:.0f} B written", element_loop_name(m.elementwise.loop), m.elementwise.bytes_read,
                         m.elementwise.bytes_written);
    case MeasurementKind::all_gather:
    case MeasurementKind::reduce_scatter:
    case MeasurementKind::all_reduce:
    case MeasurementKind::all_to_all:
    case MeasurementKind::send_recv:
      return fmt::format("{} {:.0f} B x{}{}{}", kind, m.bytes, m.gpus, at_once, m.nccl_nvls ? "" : ", NVLS off");
    case MeasurementKind::barrier: return fmt::format("barrier x{}{}", m.gpus, at_once);
    case MeasurementKind::launch: return "launch";
    case MeasurementKind::gemm_with_peer_copy: return fmt::format("gemm {} + peer copy {:.0f} B", shape, m.bytes);
    case MeasurementKind::peer_copy_with_gemm: return fmt::format("peer copy {:.0f} B beside gemm {}", m.bytes, shape);
    case MeasurementKind::gemm_with_collective:
      return fmt::format("gemm {} + {} {:.0f} B x{}{}", shape, collective_kind_name(m.collective), m.bytes, m.gpus, at_once);
    case MeasurementKind::gemm_pair: return fmt::format("gemm {} x2 on two streams", shape);
    case MeasurementKind::reduction:
      return fmt::format("reduction {} of {} x {:.0f} B", reduction_kernel_name(m.reduction), m.partials, m.bytes);
    case MeasurementKind::attention: {
      const AttentionProblem& a = m.attention;
      return fmt::format("attention {} {} {}x{} heads {} dim {}{} {}", attention_kernel_name(a.kernel), a.backward ? "backward" : "forward",
                         a.tokens / a.seq_len, a.seq_len, a.heads, a.head_dim, a.causal ? " causal" : "", dtype_name(a.dtype));
    }
    case MeasurementKind::scenario:
      if (!m.op.empty()) return fmt::format("{} {} rank{}:{}", m.scenario->name, m.scenario->variants.front(), m.op_rank, m.op);
      return fmt::format("{} {}", m.scenario->name, m.scenario->variants.front());
  }
  return std::string(kind);
}

Measurement parse_one(const Json& j, const std::string& path, const std::string& hardware, const std::string& origin,
                      const std::string& base_dir) {
  const ObjectReader probe(j, path, every_kind_key());
  Measurement m;
  m.kind = parse_kind(probe);
  const ObjectReader r(j, path, allowed_keys(m.kind));  // keys the kind does not use are errors
  m.origin = fmt::format("{} {}", origin, path);
  m.source = r.optional_string("source").value_or("");
  if (has_gemm(m.kind)) m.gemm = parse_gemm_row(r, path);
  if (has_bytes(m.kind)) {
    m.bytes = r.positive_number("bytes");
    if (m.bytes > 1e15) fail_at(r.child_path("bytes"), "larger than a petabyte");
  }
  if (has_gpus(m.kind)) {
    const std::int64_t g = r.positive_int("gpus");
    if (g < 2 || g > kMaxGpus) fail_at(r.child_path("gpus"), fmt::format("must be between 2 and {}", kMaxGpus));
    m.gpus = static_cast<int>(g);
    if (r.has("groups")) {
      const std::int64_t n = r.positive_int("groups");
      if (n > kMaxGpus / m.gpus)
        fail_at(r.child_path("groups"), fmt::format("{} groups of {} GPUs are more than {} GPUs", n, m.gpus, kMaxGpus));
      m.groups = static_cast<int>(n);
    }
  } else if (m.kind == MeasurementKind::gemm_with_peer_copy || m.kind == MeasurementKind::peer_copy_with_gemm) {
    m.gpus = 2;
  }
  if (is_collective(m.kind)) m.nccl_nvls = r.optional_bool("nccl_nvls").value_or(true);
  if (m.kind == MeasurementKind::reduction) {
    const std::int64_t n = r.positive_int("partials");
    if (n < 2 || n > kMaxGpus) fail_at(r.child_path("partials"), fmt::format("must be between 2 and {}", kMaxGpus));
    m.partials = static_cast<int>(n);
    const std::string how = r.string("reduction");
    const auto kernel = parse_reduction_kernel(how);
    if (!kernel) fail_at(r.child_path("reduction"), fmt::format("unknown reduction kernel \"{}\" (aten_sum or triton)", how));
    m.reduction = *kernel;
  }
  if (m.kind == MeasurementKind::attention) m.attention = parse_attention_problem(r);
  if (m.kind == MeasurementKind::elementwise) m.elementwise = parse_elementwise_kernel(r);
  if (names_kernel(m.kind)) m.kernel = r.optional_string("kernel").value_or("");
  if (m.kind == MeasurementKind::gemm_with_collective) {
    const std::string c = r.string("collective");
    if (c == "all_gather") m.collective = CollectiveKind::all_gather;
    else if (c == "reduce_scatter") m.collective = CollectiveKind::reduce_scatter;
    else if (c == "all_reduce") m.collective = CollectiveKind::all_reduce;
    else fail_at(r.child_path("collective"), fmt::format("unknown collective \"{}\" (all_gather, reduce_scatter or all_reduce)", c));
  }
  if (m.kind == MeasurementKind::scenario) {
    m.scenario = parse_nested_scenario(r, hardware, base_dir);
    if (r.has("op")) {
      m.op = r.string("op");
      if (r.has("rank")) {
        const Json& rank = r.at("rank");
        if (!rank.is_number_integer() || rank.get<std::int64_t>() < 0 || rank.get<std::int64_t>() >= m.scenario->gpus)
          fail_at(r.child_path("rank"), fmt::format("must be an integer from 0 to {}", m.scenario->gpus - 1));
        m.op_rank = rank.get<int>();
      }
      try {
        find_named_op(build_dag(*m.scenario, m.scenario->variants.front()), m);
      } catch (const InputError&) {
        fail_at(r.child_path("op"), fmt::format("variant \"{}\" has no op \"{}\" on rank {}", m.scenario->variants.front(), m.op, m.op_rank));
      }
    } else if (r.has("rank")) {
      fail_at(r.child_path("rank"), "only with \"op\" (the makespan is over every rank)");
    }
  }
  if (r.has("timing")) {
    const std::string t = r.string("timing");
    if (t == "events") m.timing = MeasurementTiming::events;
    else if (t != "kernel") fail_at(r.child_path("timing"), fmt::format("unknown timing \"{}\" (kernel or events)", t));
  }
  if (r.has("clock")) {
    const std::string c = r.string("clock");
    if (c != "sustained" && c != "burst") fail_at(r.child_path("clock"), fmt::format("unknown clock \"{}\" (sustained or burst)", c));
    m.burst_clock = c == "burst";
  }
  if (r.has("l2")) {
    const std::string l2 = r.string("l2");
    const auto start = parse_l2_start(l2);
    if (!start) fail_at(r.child_path("l2"), fmt::format("unknown L2 state \"{}\" (back_to_back, clean or dirty)", l2));
    m.l2_start = *start;
  }
  m.time_us = measured_time_us(r, m);
  if (r.has("weight")) m.weight = r.positive_number("weight");
  m.name = r.optional_string("name").value_or(default_name(m));
  return m;
}

}  // namespace

std::string_view measurement_kind_name(MeasurementKind k) { return info(k).name; }
std::string_view measurement_class(MeasurementKind k) { return info(k).cls; }

std::vector<Measurement> parse_measurements(const Json& j, const std::string& source) {
  const ObjectReader root(j, "$", {"format", "hardware", "description", "source", "measurements"});
  if (root.string("format") != "tpsim-measurements")
    fail_at("$.format", fmt::format("is \"{}\", expected \"tpsim-measurements\"", root.string("format")));
  const std::string hardware = root.optional_string("hardware").value_or("");
  const Json& list = root.array("measurements");
  std::vector<Measurement> out;
  const std::string base_dir = std::filesystem::path(source).parent_path().string();
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(parse_one(list[i], fmt::format("$.measurements[{}]", i), hardware, source, base_dir));
    out.back().hardware = hardware;
  }
  return out;
}

std::vector<Measurement> load_measurements_file(const std::string& file) {
  const Json j = read_json_file(file);
  try {
    if (j.is_object() && j.contains("traceEvents")) return import_kineto_trace(j, file);
    if (j.is_object() && j.contains("results") && j.contains("workload")) return import_result_json(j, file);
    if (!j.is_object() || !j.contains("measurements"))
      fail_at("$", "is neither a measurement file (\"measurements\"), a PyTorch profiler trace (\"traceEvents\") nor a tpsim result (\"results\")");
    return parse_measurements(j, file);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
}

Json measurement_json(const Measurement& m) {
  Json j;
  j["kind"] = std::string(measurement_kind_name(m.kind));
  j["name"] = m.name;
  if (has_gemm(m.kind)) {
    write_gemm_row(m.gemm, j);
    if (!m.kernel.empty()) j["kernel"] = m.kernel;
  }
  if (has_bytes(m.kind)) j["bytes"] = m.bytes;
  if (has_gpus(m.kind)) j["gpus"] = m.gpus;
  if (m.groups > 1) j["groups"] = m.groups;
  if (!m.nccl_nvls) j["nccl_nvls"] = false;
  if (m.kind == MeasurementKind::gemm_with_collective) j["collective"] = std::string(collective_kind_name(m.collective));
  if (m.kind == MeasurementKind::reduction) {
    j["partials"] = m.partials;
    j["reduction"] = std::string(reduction_kernel_name(m.reduction));
  }
  if (m.kind == MeasurementKind::attention) {
    const AttentionProblem& a = m.attention;
    j["batch"] = a.tokens / a.seq_len;
    j["seq_len"] = a.seq_len;
    j["heads"] = a.heads;
    j["kv_heads"] = a.kv_heads;
    j["head_dim"] = a.head_dim;
    if (a.v_head_dim > 0) j["v_head_dim"] = a.v_head_dim;
    j["causal"] = a.causal;
    j["pass"] = a.backward ? "backward" : "forward";
    j["implementation"] = std::string(attention_kernel_name(a.kernel));
    j["dtype"] = std::string(dtype_name(a.dtype));
  }
  if (m.timing == MeasurementTiming::events) j["timing"] = "events";
  if (m.burst_clock) j["clock"] = "burst";
  if (m.l2_start != L2Start::back_to_back) j["l2"] = std::string(l2_start_name(m.l2_start));
  j["time_us"] = m.time_us;
  if (m.weight != 1) j["weight"] = m.weight;
  if (!m.source.empty()) j["source"] = m.source;
  return j;
}

Json measurements_file_json(const std::vector<Measurement>& ms, const std::string& hardware, const std::string& description) {
  Json list = Json::array();
  for (const auto& m : ms)
    if (m.kind != MeasurementKind::scenario) list.push_back(measurement_json(m));
  Json j{{"format", "tpsim-measurements"}, {"measurements", list}};
  if (!hardware.empty()) j["hardware"] = hardware;
  if (!description.empty()) j["description"] = description;
  return j;
}

void check_hardware_serves(const std::vector<Measurement>& ms, const HardwareSpec& hw) {
  for (const Measurement& m : ms) {
    if (has_gemm(m.kind) && !hw.computes(m.gemm.dtype))
      throw InputError(fmt::format("{}: {}", m.origin, missing_dtype_message(hw, m.gemm.dtype)));
    if (m.kind == MeasurementKind::attention) {
      const std::string missing = missing_attention_kernel(hw, m.attention.kernel);
      if (!missing.empty()) throw InputError(fmt::format("{}: implementation \"{}\": {}", m.origin, attention_kernel_name(m.attention.kernel), missing));
    }
  }
}

bool timed_in_burst(const Measurement& m) {
  return m.burst_clock || (m.kind == MeasurementKind::scenario && m.scenario && m.scenario->software.burst_clock);
}

std::optional<std::string> burst_clock_note(const std::vector<Measurement>& ms, const HardwareSpec& hw) {
  if (hw.power.burst_speed > 0) return std::nullopt;
  const auto n = std::count_if(ms.begin(), ms.end(), timed_in_burst);
  if (n == 0) return std::nullopt;
  return fmt::format("{} row(s) were timed in bursts and hardware {} gives no power.burst_speed: they are predicted at the rate its "
                     "parameters give (fitted to them, those parameters describe a burst's clock, not a sustained run's)",
                     n, hw.name);
}

L2Start l2_start_of(const Measurement& m) {
  return m.kind == MeasurementKind::scenario && m.scenario ? m.scenario->software.l2_start : m.l2_start;
}

std::optional<std::string> l2_start_note(const std::vector<Measurement>& ms, const HardwareSpec& hw) {
  if (hw.memory.l2_dirty_bytes > 0) return std::nullopt;
  const auto n = std::count_if(ms.begin(), ms.end(), [](const Measurement& m) { return l2_start_of(m) != L2Start::back_to_back; });
  if (n == 0) return std::nullopt;
  return fmt::format("{} row(s) were timed after a flush of the L2 and hardware {} gives no memory.l2_capacity and l2_dirty_share: "
                     "they are predicted as kernels launched back to back",
                     n, hw.name);
}

}  // namespace tpsim
