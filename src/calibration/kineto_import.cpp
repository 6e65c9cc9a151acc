#include "tpsim/calibration/kineto_import.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "tpsim/core/median.hpp"
#include "tpsim/io/scenario.hpp"

namespace tpsim {

namespace {

struct Span {
  double start = 0, end = 0;
  std::string device;  // GEMMs and peer copies: the GPU they ran on
};

using Groups = std::map<std::string, std::pair<Measurement, std::vector<double>>>;  // name -> measurement, durations

std::optional<Dtype> torch_dtype(std::string s) {
  if (s.starts_with("c10::")) s = s.substr(5);
  if (s == "BFloat16") return Dtype::bf16;
  if (s == "Half") return Dtype::fp16;
  if (s == "float" || s == "Float") return Dtype::fp32;
  if (s.starts_with("Float8_e4m3") || s.starts_with("Float8_e5m2")) return Dtype::fp8;
  return std::nullopt;
}

// A string field, or "" when absent or not a string (events of other kinds vary).
std::string text(const Json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Categories as current traces write them ("cpu_op", "kernel") and as early ones did ("Operator", "Kernel").
bool is_cpu_op(const Json& e) {
  const std::string cat = lowercase(text(e, "cat"));
  return cat == "cpu_op" || cat == "operator";
}
bool is_kernel(const Json& e) { return lowercase(text(e, "cat")) == "kernel"; }

bool is_gemm_op(const std::string& name) {
  return name == "aten::mm" || name == "aten::addmm" || name == "aten::_scaled_mm";
}

std::int64_t dim_at(const Json& dims, std::size_t i, std::size_t d, const std::string& path) {
  return as_positive_int(dims[i][d], fmt::format("{}[{}][{}]", path, i, d));
}

// How aten::_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
// ran: rowwise where scale_a holds a scale per row ([m, 1]; tensor-wise: one, []), and
// use_fast_accum from "Concrete Inputs" (recorded as "True" / "False"; absent: its default, off).
void read_scaled_mm_run(const Json& args, const Json& dims, const std::string& path, GemmProblem& p) {
  if (dims.size() > 2 && dims[2].is_array())  // more than one scale: some dimension past 1
    for (std::size_t d = 0; d < dims[2].size(); ++d)
      if (as_positive_int(dims[2][d], fmt::format("{}.args.\"Input Dims\"[2][{}]", path, d)) > 1) p.scaled_mm.rowwise_scales = true;
  constexpr std::size_t kUseFastAccum = 7;
  if (!args.contains("Concrete Inputs")) return;
  const Json& concrete = args["Concrete Inputs"];
  if (!concrete.is_array() || concrete.size() <= kUseFastAccum || !concrete[kUseFastAccum].is_string()) return;
  const std::string fast = concrete[kUseFastAccum].get<std::string>();
  if (fast != "True" && fast != "False" && !fast.empty())
    fail_at(fmt::format("{}.args.\"Concrete Inputs\"[{}]", path, kUseFastAccum), fmt::format("use_fast_accum must be \"True\" or \"False\", got \"{}\"", fast));
  p.scaled_mm.fast_accumulation = fast == "True";
}

// aten::mm: [[m,k],[k,n]]; aten::_scaled_mm: [[m,k],[k,n],[scales]...]; aten::addmm: [[bias], [m,k], [k,n], [], []].
GemmProblem gemm_shape(const Json& args, const std::string& op, const std::string& path) {
  const std::string dims_path = path + ".args.\"Input Dims\"";
  const std::string types_path = path + ".args.\"Input type\"";
  if (!args.contains("Input Dims")) fail_at(path + ".args", "has no \"Input Dims\" (profile with record_shapes=True)");
  const Json& dims = args["Input Dims"];
  const std::size_t a = op == "aten::addmm" ? 1 : 0;
  if (!dims.is_array() || dims.size() < a + 2) fail_at(dims_path, fmt::format("{} needs {} inputs", op, a + 2));
  for (std::size_t i = a; i < a + 2; ++i)
    if (!dims[i].is_array() || dims[i].size() != 2) fail_at(fmt::format("{}[{}]", dims_path, i), "must be a 2-D shape");
  const std::int64_t m = dim_at(dims, a, 0, dims_path), k = dim_at(dims, a, 1, dims_path);
  const std::int64_t k2 = dim_at(dims, a + 1, 0, dims_path), n = dim_at(dims, a + 1, 1, dims_path);
  if (k != k2) fail_at(dims_path, fmt::format("inner dimensions differ ({} and {})", k, k2));
  for (std::int64_t v : {m, n, k})
    if (v > kMaxDimension) fail_at(dims_path, fmt::format("{} is larger than the limit {}", v, kMaxDimension));
  check_gemm_fits(m, n, k, dims_path);
  if (!args.contains("Input type") || !args["Input type"].is_array() || args["Input type"].size() <= a)
    fail_at(path + ".args", "has no \"Input type\" list");
  const std::string t = as_string(args["Input type"][a], fmt::format("{}[{}]", types_path, a));
  const auto dtype = torch_dtype(t);
  if (!dtype) fail_at(fmt::format("{}[{}]", types_path, a), fmt::format("dtype \"{}\" is not one tpsim models", t));
  GemmProblem p{m, n, k, *dtype};
  if (op == "aten::_scaled_mm") read_scaled_mm_run(args, dims, path, p);
  return p;
}

double number_arg(const Json& args, const std::string& key, const std::string& path) {
  if (!args.contains(key)) fail_at(path, fmt::format("missing \"{}\"", key));
  return as_positive_number(args[key], fmt::format("{}.\"{}\"", path, key));
}

int dtype_size(const std::string& s, const std::string& path) {
  static const std::map<std::string, int> sizes = {{"BFloat16", 2}, {"Half", 2},  {"Float", 4}, {"Double", 8},
                                                   {"Int", 4},      {"Long", 8},  {"Byte", 1},  {"Char", 1},
                                                   {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}};
  const auto it = sizes.find(s);
  if (it == sizes.end()) fail_at(path, fmt::format("unknown dtype \"{}\"", s));
  return it->second;
}

// "Group size", or the length of "Process Group Ranks" (a list, or its text "[0, 1, ...]") in traces without it.
int group_size(const Json& args, const std::string& path) {
  double gpus = 0;
  if (args.contains("Group size") || !args.contains("Process Group Ranks")) {
    gpus = number_arg(args, "Group size", path);
  } else {
    const Json& ranks = args["Process Group Ranks"];
    if (ranks.is_array()) gpus = static_cast<double>(ranks.size());
    else if (ranks.is_string()) {
      const std::string r = ranks.get<std::string>();
      gpus = r.find_first_of("0123456789") == std::string::npos ? 0 : static_cast<double>(std::count(r.begin(), r.end(), ',') + 1);
    } else fail_at(path + ".\"Process Group Ranks\"", "must be a list of ranks");
  }
  if (gpus < 2 || gpus > kMaxGpus || gpus != static_cast<int>(gpus))
    fail_at(path + (args.contains("Group size") ? ".\"Group size\"" : ".\"Process Group Ranks\""),
            fmt::format("must give a group of 2 to {} GPUs", kMaxGpus));
  return static_cast<int>(gpus);
}

// The GPU of a device event: its "device" arg, else its pid (Kineto's pid for GPU rows).
std::string device_of(const Json& e, const Json& args) {
  if (args.contains("device")) return args["device"].dump();
  return e.contains("pid") ? e["pid"].dump() : std::string();
}

Span timed_span(const Json& e, const std::string& path) {
  if (!e.contains("ts") || !e["ts"].is_number()) fail_at(path + ".ts", "must be a number (microseconds)");
  const double dur = as_positive_number(e.value("dur", Json()), path + ".dur");
  return Span{e["ts"].get<double>(), e["ts"].get<double>() + dur, {}};
}

// A copy-engine peer copy (cudaMemcpyPeerAsync, or copy_ between GPUs): its bytes are in the args.
struct PeerCopy {
  Span span;
  double bytes = 0;
};

PeerCopy peer_copy_of(const Json& args, const std::string& path, Span span) {
  const double bytes = number_arg(args, "bytes", path + ".args");
  if (bytes > 1e15) fail_at(path + ".args.\"bytes\"", "larger than a petabyte");
  return {std::move(span), bytes};
}

// A copy alone is a `peer_copy`; one that ran wholly inside one GEMM on its GPU (async TP's pull
// beside the other stream's submatmul) a `peer_copy_with_gemm` of that GEMM's shape.
void add_peer_copy(const PeerCopy& c, const GemmProblem* beside, Groups& groups) {
  Measurement m;
  m.kind = beside ? MeasurementKind::peer_copy_with_gemm : MeasurementKind::peer_copy;
  m.bytes = c.bytes;
  m.gpus = 2;
  if (beside) {
    m.gemm = *beside;
    m.name = fmt::format("kineto peer copy {:.0f} B beside gemm {}x{}x{} {}", m.bytes, beside->m, beside->n, beside->k, dtype_name(beside->dtype));
  } else {
    m.name = fmt::format("kineto peer_copy {:.0f} B", m.bytes);
  }
  groups.try_emplace(m.name, m, std::vector<double>{}).first->second.second.push_back(c.span.end - c.span.start);
}

// An all-gather, reduce-scatter, all-reduce or all-to-all kernel sized by `comm` (other collectives are not measured).
void add_collective(const Json& comm, const std::string& path, double dur, Groups& groups) {
  std::string lower = lowercase(as_string(comm["Collective name"], path + ".\"Collective name\""));
  lower.erase(std::remove(lower.begin(), lower.end(), '_'), lower.end());
  Measurement m;
  if (lower.find("allgather") != std::string::npos) m.kind = MeasurementKind::all_gather;
  else if (lower.find("reducescatter") != std::string::npos) m.kind = MeasurementKind::reduce_scatter;
  else if (lower.find("allreduce") != std::string::npos) m.kind = MeasurementKind::all_reduce;
  else if (lower.find("alltoall") != std::string::npos) m.kind = MeasurementKind::all_to_all;
  else return;  // send/recv, broadcast, ...: not a class tpsim calibrates from traces
  const int size = dtype_size(as_string(comm.value("dtype", Json()), path + ".dtype"), path + ".dtype");
  m.bytes = number_arg(comm, m.kind == MeasurementKind::all_gather ? "Out msg nelems" : "In msg nelems", path) * size;
  m.gpus = group_size(comm, path);
  m.name = fmt::format("kineto {} {:.0f} B x{}", measurement_kind_name(m.kind), m.bytes, m.gpus);
  groups.try_emplace(m.name, m, std::vector<double>{}).first->second.second.push_back(dur);
}

}  // namespace

std::vector<Measurement> import_kineto_trace(const Json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("traceEvents")) fail_at("$", "has no \"traceEvents\" (not a PyTorch profiler trace)");
  const Json& events = j["traceEvents"];
  if (!events.is_array()) fail_at("$.traceEvents", "must be an array");
  // Pass 1: the aten GEMM ops, and the ops carrying a collective's sizes (record_param_comms), by External id.
  std::map<std::int64_t, std::pair<std::string, std::size_t>> gemm_ops;  // id -> (op name, event index)
  std::map<std::int64_t, std::size_t> comm_ops;                          // id -> event index
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    if (!e.is_object()) fail_at(fmt::format("$.traceEvents[{}]", i), "must be an object");
    if (!is_cpu_op(e) || !e.contains("args") || !e["args"].is_object()) continue;
    const Json& id = e["args"].value("External id", Json());
    if (!id.is_number_integer()) continue;
    if (is_gemm_op(text(e, "name"))) gemm_ops[id.get<std::int64_t>()] = {text(e, "name"), i};
    else if (e["args"].contains("Collective name")) comm_ops[id.get<std::int64_t>()] = i;
  }
  // Pass 2: kernels and peer copies. A GEMM may launch more than one kernel (split-K
  // reduce): its time is their span. Communication of any kind is remembered per GPU.
  std::map<std::int64_t, Span> gemm_spans;
  std::map<std::string, std::vector<Span>> comm_spans;  // device -> NCCL kernels and peer copies
  std::vector<PeerCopy> copies;
  Groups groups;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    if (text(e, "ph") != "X") continue;
    const std::string path = fmt::format("$.traceEvents[{}]", i);
    const Json args = e.contains("args") && e["args"].is_object() ? e["args"] : Json::object();
    if (lowercase(text(e, "cat")) == "gpu_memcpy" && text(e, "name").starts_with("Memcpy PtoP")) {
      Span span = timed_span(e, path);
      span.device = device_of(e, args);
      comm_spans[span.device].push_back(span);
      copies.push_back(peer_copy_of(args, path, std::move(span)));
      continue;
    }
    if (!is_kernel(e)) continue;
    const std::string name = as_string(e.value("name", Json()), path + ".name");
    const Json& ext = args.value("External id", Json());
    const bool linked = ext.is_number_integer();
    if (linked && gemm_ops.count(ext.get<std::int64_t>())) {
      const Span k = timed_span(e, path);
      auto [it, fresh] = gemm_spans.try_emplace(ext.get<std::int64_t>(), Span{k.start, k.end, device_of(e, args)});
      if (!fresh) it->second.start = std::min(it->second.start, k.start), it->second.end = std::max(it->second.end, k.end);
      continue;
    }
    // Collective sizes are on the kernel itself (recent Kineto copies them from the
    // record_param_comms op), or only on that op, which the kernel names by External id.
    std::string args_path = path + ".args";
    const Json* comm = args.contains("Collective name") ? &args : nullptr;
    if (!comm && linked && comm_ops.count(ext.get<std::int64_t>())) {
      const std::size_t op = comm_ops.at(ext.get<std::int64_t>());
      comm = &events[op]["args"];
      args_path = fmt::format("$.traceEvents[{}].args", op);
    }
    if (!comm && lowercase(name).find("nccl") == std::string::npos) continue;  // elementwise kernels, ...
    const Span span = timed_span(e, path);
    comm_spans[device_of(e, args)].push_back(span);
    if (comm) add_collective(*comm, args_path, span.end - span.start, groups);  // else sized nowhere: not a measurement
  }
  // A GEMM that ran beside communication lost SMs or memory bandwidth to it: not a GEMM alone.
  std::map<std::string, int> overlapped;  // measurement name -> kernels left out
  std::map<std::int64_t, GemmProblem> shapes;
  for (const auto& [id, gemm_span] : gemm_spans) {
    const Span& span = gemm_span;  // a plain reference: lambdas may not capture structured bindings before C++20's fix in clang 16
    const auto& [op, index] = gemm_ops.at(id);
    Measurement m;
    m.kind = MeasurementKind::gemm;
    m.gemm = shapes[id] = gemm_shape(events[index]["args"], op, fmt::format("$.traceEvents[{}]", index));
    m.name = fmt::format("kineto gemm {}x{}x{} {}{}{}", m.gemm.m, m.gemm.n, m.gemm.k, dtype_name(m.gemm.dtype),
                         m.gemm.scaled_mm.rowwise_scales ? " rowwise" : "", m.gemm.scaled_mm.fast_accumulation ? " fast accumulation" : "");
    const auto& beside = comm_spans[span.device];
    if (std::any_of(beside.begin(), beside.end(), [&](const Span& c) { return c.start < span.end && c.end > span.start; })) {
      ++overlapped[m.name];
      continue;
    }
    groups.try_emplace(m.name, m, std::vector<double>{}).first->second.second.push_back(span.end - span.start);
  }
  // A peer copy that a GEMM on its GPU overlapped only in part, or several did, is neither.
  std::map<std::string, int> partly;  // measurement name -> copies left out
  for (const PeerCopy& c : copies) {
    std::vector<std::int64_t> over;
    for (const auto& [id, g] : gemm_spans)
      if (g.device == c.span.device && g.start < c.span.end && g.end > c.span.start) over.push_back(id);
    const bool inside_one = over.size() == 1 && gemm_spans.at(over[0]).start <= c.span.start && gemm_spans.at(over[0]).end >= c.span.end;
    if (over.empty() || inside_one) add_peer_copy(c, over.empty() ? nullptr : &shapes.at(over[0]), groups);
    else ++partly[fmt::format("kineto peer_copy {:.0f} B", c.bytes)];
  }
  if (groups.empty())
    fail_at("$.traceEvents", overlapped.empty() && partly.empty()
                                 ? "holds no GEMM kernel of an aten::mm/addmm op, no NCCL all-gather or reduce-scatter kernel and no peer copy"
                                 : "holds no measurement: its GEMM kernels ran beside communication, its peer copies partly beside GEMMs, "
                                   "and no collective is sized");
  std::vector<Measurement> out;
  for (auto& [key, g] : groups) {
    g.first.time_us = median(g.second);
    g.first.origin = source;
    g.first.source = fmt::format("{}: median of {} kernel(s)", source, g.second.size());
    if (const auto it = overlapped.find(key); it != overlapped.end())
      g.first.source += fmt::format("; {} more ran beside communication and were left out", it->second);
    if (const auto it = partly.find(key); it != partly.end())
      g.first.source += fmt::format("; {} more ran partly beside GEMMs and were left out", it->second);
    out.push_back(std::move(g.first));
  }
  return out;
}

}  // namespace tpsim
