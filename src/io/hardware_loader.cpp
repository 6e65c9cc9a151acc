#include "tpsim/io/hardware_loader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "hardware_quantities.hpp"
#include "tpsim/io/install_paths.hpp"
#include "tpsim/io/relative_path.hpp"

namespace tpsim {

using hardware_file::Quantities;

namespace {

namespace fs = std::filesystem;

// sm.resident_clusters: {"value": [clusters of 1 CTA, of 2, ...], "unit": "count", "source": ...},
// each a whole number of clusters whose CTAs fit the GPU's SMs.
std::vector<int> parse_resident_clusters(const ObjectReader& sm, int sms) {
  const ObjectReader q = sm.object("resident_clusters", {"value", "unit", "source"});
  if (q.string("unit") != "count") fail_at(q.child_path("unit"), "must be \"count\" (clusters resident at once, per cluster size)");
  if (q.string("source").empty()) fail_at(q.child_path("source"), "must say where the number comes from");
  const Json& v = q.array("value");
  if (v.empty() || v.size() > static_cast<std::size_t>(kMaxClusterCtas))
    fail_at(q.child_path("value"), fmt::format("must list the clusters of 1 to at most {} CTAs, got {} entries", kMaxClusterCtas, v.size()));
  std::vector<int> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", q.child_path("value"), i);
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < 1) fail_at(p, fmt::format("must be a whole number of at least 1, got {}", v[i].dump()));
    const std::int64_t clusters = v[i].get<std::int64_t>();
    if (clusters > sms) fail_at(p, fmt::format("{} clusters are more than the {} SMs there are", clusters, sms));
    const std::int64_t ctas = clusters * static_cast<std::int64_t>(i + 1);  // bounded: at most 16 x the SM count
    if (ctas > sms) fail_at(p, fmt::format("{} clusters of {} CTAs need {} SMs, more than the {} there are", clusters, i + 1, ctas, sms));
    out.push_back(static_cast<int>(clusters));
  }
  return out;
}

// A "dtypes" list as a bit per Dtype.
unsigned parse_dtype_bits(const ObjectReader& r, const char* key) {
  const Json& ds = r.array(key);
  if (ds.empty()) fail_at(r.child_path(key), "must name at least one dtype");
  unsigned bits = 0;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", r.child_path(key), i);
    const std::string name = as_string(ds[i], p);
    const auto d = parse_dtype(name);
    if (!d) fail_at(p, fmt::format("unknown dtype \"{}\" (bf16, fp16, fp32 or fp8)", name));
    bits |= 1u << static_cast<int>(*d);
  }
  return bits;
}

GemmTile parse_tile(const Json& j, const std::string& path) {
  const ObjectReader r(j, path, {"shape", "mainloop_efficiency", "dtypes"});
  const std::string shape = r.string("shape");
  const auto extents = parse_extents(shape, 3, 4096);
  if (!extents) fail_at(r.child_path("shape"), fmt::format("must look like \"128x256x64\" (each 1 to 4096), got \"{}\"", shape));
  GemmTile t;
  t.m = (*extents)[0], t.n = (*extents)[1], t.k = (*extents)[2];
  t.mainloop_efficiency = Quantities(r).get("mainloop_efficiency", "fraction");
  // Without "dtypes" a tile serves every dtype (hardware files written before kernels were told apart).
  if (r.has("dtypes")) t.dtypes = parse_dtype_bits(r, "dtypes");
  return t;
}

// cuBLAS's rowwise-scaled kernels: one of gemm.tiles serving fp8, named by its shape.
LibraryRowwiseSpec parse_library_rowwise(const ObjectReader& r, const std::vector<GemmTile>& tiles) {
  if (r.string("source").empty()) fail_at(r.child_path("source"), "must say where the tile comes from (the kernels seen to run)");
  const std::string shape = r.string("tile");
  const auto extents = parse_extents(shape, 3, 4096);
  if (!extents) fail_at(r.child_path("tile"), fmt::format("must look like \"128x128x128\" (each 1 to 4096), got \"{}\"", shape));
  for (const GemmTile& t : tiles)
    if (t.m == (*extents)[0] && t.n == (*extents)[1] && t.k == (*extents)[2] && t.serves(Dtype::fp8)) return LibraryRowwiseSpec{t};
  fail_at(r.child_path("tile"), fmt::format("{} is not one of gemm.tiles serving fp8 (its kernel family's rate comes from there)", shape));
}

NcclProtocol parse_protocol(const std::string& name, const ObjectReader& r) {
  const Quantities q(r);
  NcclProtocol p;
  p.name = name;
  p.base_latency = q.time("base_latency");
  p.step_latency = q.time("step_latency");
  p.bandwidth_efficiency = q.get("bandwidth_efficiency", "fraction");
  p.threads = q.count("threads_per_block");
  p.channel_threshold = q.get("channel_threshold", "bytes");
  if (r.has("startup")) p.startup = q.time("startup");
  return p;
}

// NCCL's send/recv channel space and chunks; both counts are powers of 2 (NCCL rounds them).
P2pSpec parse_p2p(const ObjectReader& r) {
  const Quantities q(r);
  P2pSpec p;
  p.channels = q.count("channels", 64);
  p.channels_per_peer = q.count("channels_per_peer", 64);
  p.channels_per_net_peer = q.count("channels_per_net_peer", 64);
  for (const auto& [key, value] : {std::pair{"channels", p.channels}, std::pair{"channels_per_peer", p.channels_per_peer}})
    if ((value & (value - 1)) != 0) fail_at(r.child_path(key) + ".value", fmt::format("must be a power of 2 (NCCL rounds it up), got {}", value));
  if (p.channels_per_peer > p.channels) fail_at(r.child_path("channels_per_peer"), "cannot exceed nccl.p2p.channels");
  p.chunk_bytes = q.bytes("chunk_size");
  p.net_chunk_bytes = q.bytes("net_chunk_size");
  p.ll_threshold_bytes = q.bytes("ll_threshold");
  p.threads = q.count("threads_per_block", 1024);
  if (r.has("channel_bandwidth")) p.channel_bytes_per_ps = q.get("channel_bandwidth", "bandwidth");
  return p;
}

NvlsSpec parse_nvls(const ObjectReader& r, const FabricSpec& fabric) {
  const Quantities q(r);
  NvlsSpec n;
  n.channels = q.count("channels", 1024);
  // NCCL's tuning model needs two channels for NVLS (src/graph/tuning.cc).
  if (n.channels < 2) fail_at(r.child_path("channels") + ".value", "NVLS needs at least 2 channels");
  n.threads = q.count("threads_per_block");
  n.efficiency = q.get("efficiency", "fraction");
  n.latency = q.time("latency");
  n.min_ranks = q.count("min_ranks", 1024);
  if (n.min_ranks < 2) fail_at(r.child_path("min_ranks") + ".value", "NVLS needs at least 2 ranks");
  // The reduction happens in the NVSwitch: a model derived from an NVSwitch part that
  // joins its GPUs otherwise (bridged pairs, a ring of links) has no NVLS.
  if (fabric.topology != "switch" && fabric.topology != "multi_node") return {};
  return n;
}

LinkSpec parse_link(const ObjectReader& parent, const std::string& key) {
  const ObjectReader r = parent.object(key, {"bandwidth_per_direction", "efficiency", "latency"});
  const Quantities q(r);
  return LinkSpec{q.get("bandwidth_per_direction", "bandwidth") * q.get("efficiency", "fraction"), q.time("latency")};
}

ClusterSpec parse_cluster(const ObjectReader& r, const NcclSpec& nccl) {
  ClusterSpec c;
  c.nic = parse_link(r, "nic");
  const Quantities q(r);
  c.nodes_per_leaf = q.count("nodes_per_leaf", 1 << 20);
  c.oversubscription = q.get("oversubscription", "ratio");
  c.tree_bandwidth_ratio = q.get("tree_bandwidth_ratio", "fraction");
  const ObjectReader lat = r.object("nccl_net_latency", {"LL", "LL128", "Simple"});
  for (const NcclProtocol& p : nccl.protocols) {
    if (!lat.has(p.name)) fail_at(lat.path(), fmt::format("needs \"{}\" (nccl.protocols has it)", p.name));
    // NCCL's NVLS tree runs the Simple protocol only, where the nodes have NVLS.
    const bool simple = p.name == "Simple";
    const ObjectReader one = lat.object(p.name, simple ? std::vector<std::string>{"ring", "tree", "nvls_tree"}
                                                       : std::vector<std::string>{"ring", "tree"});
    if (simple && nccl.nvls.present() && !one.has("nvls_tree"))
      fail_at(one.path(), "needs \"nvls_tree\" (nccl.nvls is present: NCCL's NVLS tree runs across nodes)");
    c.net_latency.push_back({p.name, Quantities(one).time("ring"), Quantities(one).time("tree"),
                             one.has("nvls_tree") ? Quantities(one).time("nvls_tree") : 0});
  }
  if (r.has("sharp")) {
    const ObjectReader sharp = r.object("sharp", {"latency", "nvls_latency"});
    const Quantities sq(sharp);
    c.sharp.latency = sq.time("latency");
    if (nccl.nvls.present() && !sharp.has("nvls_latency"))
      fail_at(sharp.path(), "needs \"nvls_latency\" (nccl.nvls is present: NCCL runs NVLS across nodes on SHARP)");
    if (sharp.has("nvls_latency")) c.sharp.nvls_latency = sq.time("nvls_latency");
  }
  return c;
}

FabricSpec parse_fabric(const ObjectReader& r) {
  FabricSpec f;
  f.topology = r.string("topology");
  const std::vector<std::string> kinds = {"switch", "pairs", "ring", "multi_node"};
  if (std::find(kinds.begin(), kinds.end(), f.topology) == kinds.end()) {
    std::string msg = fmt::format("unknown topology \"{}\"", f.topology);
    if (auto s = closest_match(f.topology, kinds)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
    else msg += fmt::format(" (supported: {})", fmt::join(kinds, ", "));
    fail_at(r.child_path("topology"), msg);
  }
  f.nvlink = parse_link(r, "nvlink");
  // Each topology needs exactly its own links; anything else is a mistake worth naming.
  const auto require = [&](const std::string& key, bool needed) {
    if (needed && !r.has(key)) fail_at(r.path(), fmt::format("topology \"{}\" needs \"{}\"", f.topology, key));
    if (!needed && r.has(key)) fail_at(r.child_path(key), fmt::format("not used by topology \"{}\"", f.topology));
  };
  require("pcie", f.topology == "pairs");
  require("nic", f.topology == "multi_node");
  if (r.has("pcie")) f.pcie = parse_link(r, "pcie");
  if (r.has("nic")) f.nic = parse_link(r, "nic");
  // Every topology but multi_node is one node: a TP group larger than it does not exist.
  f.gpus_per_node = Quantities(r).count("gpus_per_node", 4096);
  return f;
}

// A hardware file may start from another ("base": "h100_sxm") and override
// sections of it: objects merge key by key, null removes a key, anything else replaces.
void merge_into(Json& target, const Json& patch) {
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) target.erase(key);
    else if (value.is_object() && target.contains(key) && target[key].is_object()) merge_into(target[key], value);
    else target[key] = value;
  }
}

Json resolve_base(const Json& j, const std::string& dir, int depth) {
  if (!j.is_object() || !j.contains("base")) return j;
  if (depth > 8) fail_at("$.base", "too many levels of \"base\" (a cycle?)");
  const std::string ref = as_string(j["base"], "$.base");
  const bool is_path = ref.find('/') != std::string::npos || ref.ends_with(".json");
  // A path is relative to the file that names it; a name is a shipped model.
  const fs::path file = is_path ? resolve_relative(ref, dir) : fs::path(models_dir()) / (ref + ".json");
  if (!fs::exists(file)) fail_at("$.base", fmt::format("base hardware \"{}\" not found (as {})", ref, file.string()));
  Json merged = resolve_base(read_json_file(file.string()), file.parent_path().string(), depth + 1);
  Json patch = j;
  patch.erase("base");
  merge_into(merged, patch);
  return merged;
}

// The vendor library's measured split-K rule (gemm.library_split).
GemmLibrarySplitSpec parse_library_split(const ObjectReader& r) {
  GemmLibrarySplitSpec rule;
  rule.dtypes = parse_dtype_bits(r, "dtypes");
  const std::string tile = r.string("reference_tile");
  const auto extents = parse_extents(tile, 2, 4096);
  if (!extents)
    fail_at(r.child_path("reference_tile"), fmt::format("must look like \"128x128\" (rows x columns, each 1 to 4096), got \"{}\"", tile));
  rule.reference_m = (*extents)[0], rule.reference_n = (*extents)[1];
  const Quantities q(r);
  rule.depth = q.count("depth", 1 << 24);
  rule.min_slice = q.count("min_slice", 1 << 24);
  return rule;
}

// One of PyTorch's grouped GEMM kernels: its tiles are one family (they serve the same dtypes).
void parse_grouped(const ObjectReader& g, GroupedGemmSpec& out) {
  out.small_tile = parse_tile(g.at("small_tile"), g.child_path("small_tile"));
  out.large_tile = parse_tile(g.at("large_tile"), g.child_path("large_tile"));
  if (out.small_tile.dtypes != out.large_tile.dtypes)
    fail_at(g.path(), "small_tile and large_tile must serve the same dtypes (one kernel family)");
  const Quantities q(g);
  out.small_dimension = q.count("small_dimension");
  if (g.has("large_problem_tile") != g.has("large_problem_dimension"))
    fail_at(g.path(), "give \"large_problem_tile\" and \"large_problem_dimension\" together");
  if (!g.has("large_problem_tile")) return;
  out.large_problem_tile = parse_tile(g.at("large_problem_tile"), g.child_path("large_problem_tile"));
  if (out.large_problem_tile.dtypes != out.large_tile.dtypes)
    fail_at(g.path(), "large_problem_tile and large_tile must serve the same dtypes (one kernel family)");
  out.large_problem_dimension = q.count("large_problem_dimension");
  if (out.large_problem_dimension < 1) fail_at(g.child_path("large_problem_dimension"), "must be at least 1");
}

}  // namespace

HardwareSpec parse_hardware(const Json& j, const std::string& src) {
  (void)src;
  const ObjectReader root(j, "$", {"name", "description", "base", "sm", "compute", "gemm", "memory", "launch",
                                   "copy_engines", "fabric", "cluster", "nccl", "barrier", "elementwise", "reduction", "attention",
                                   "power"});
  HardwareSpec hw;
  hw.name = root.string("name");
  hw.description = root.optional_string("description").value_or("");

  const ObjectReader sm = root.object("sm", {"count", "max_threads", "registers", "shared_memory", "max_blocks", "resident_clusters"});
  const Quantities smq(sm);
  hw.sm.count = smq.count("count", 4096);
  hw.sm.capacity = {smq.count("max_threads", 1 << 16), smq.count("registers", 1 << 24), smq.bytes("shared_memory"),
                    smq.count("max_blocks", 1024)};
  if (sm.has("resident_clusters")) hw.sm.resident_clusters = parse_resident_clusters(sm, hw.sm.count);

  const ObjectReader compute = root.object("compute", {"peak_dense"});
  const ObjectReader peak = compute.object("peak_dense", {"bf16", "fp16", "fp32", "fp8"});
  // A dtype the GPU has no math for (fp8 before Hopper) is simply left out.
  for (Dtype d : {Dtype::bf16, Dtype::fp16, Dtype::fp32, Dtype::fp8})
    if (peak.has(std::string(dtype_name(d))))
      hw.peak_flops_per_ps[static_cast<int>(d)] = Quantities(peak).get(std::string(dtype_name(d)), "flops");

  const ObjectReader gemm = root.object("gemm", {"tiles", "block", "block_prologue", "kernel_ramp", "l2_load_bandwidth", "max_split_k", "min_split_k_depth", "library_split",
                                                 "grouped", "scaled_grouped", "rowwise_scaled", "library_rowwise", "slow_accumulation"});
  const Json& tiles = gemm.array("tiles");
  if (tiles.empty()) fail_at(gemm.child_path("tiles"), "needs at least one tile");
  for (std::size_t i = 0; i < tiles.size(); ++i)
    hw.gemm.tiles.push_back(parse_tile(tiles[i], fmt::format("{}[{}]", gemm.child_path("tiles"), i)));
  for (Dtype d : {Dtype::bf16, Dtype::fp16, Dtype::fp32, Dtype::fp8})
    if (peak.has(std::string(dtype_name(d))) &&
        std::none_of(hw.gemm.tiles.begin(), hw.gemm.tiles.end(), [d](const GemmTile& t) { return t.serves(d); }))
      fail_at(gemm.child_path("tiles"), fmt::format("no tile serves {}, which compute.peak_dense lists", dtype_name(d)));
  const ObjectReader block = gemm.object("block", {"threads", "registers_per_thread", "shared_memory"});
  const Quantities bq(block);
  hw.gemm.block = {bq.count("threads"), bq.count("threads") * bq.count("registers_per_thread"), bq.bytes("shared_memory"), 1};
  const Quantities gq(gemm);
  hw.gemm.block_prologue = gq.time("block_prologue");
  hw.gemm.kernel_ramp = gq.time("kernel_ramp");
  hw.gemm.l2_load_bytes_per_ps_per_sm = gq.get("l2_load_bandwidth", "bandwidth");
  hw.gemm.max_split_k = gq.count("max_split_k", 1024);
  hw.gemm.min_split_k_depth = gq.count("min_split_k_depth");
  if (gemm.has("library_split"))
    hw.gemm.library_split = parse_library_split(gemm.object("library_split", {"dtypes", "reference_tile", "depth", "min_slice"}));
  for (const char* key : {"grouped", "scaled_grouped"})
    if (gemm.has(key)) parse_grouped(gemm.object(key, {"small_tile", "large_tile", "small_dimension", "large_problem_tile", "large_problem_dimension"}),
                                     key == std::string("grouped") ? hw.gemm.grouped : hw.gemm.scaled_grouped);
  if (hw.gemm.grouped.present() && hw.gemm.scaled_grouped.present() && (hw.gemm.grouped.large_tile.dtypes & hw.gemm.scaled_grouped.large_tile.dtypes))
    fail_at(gemm.child_path("scaled_grouped"), "serves a dtype gemm.grouped serves: each dtype has one grouped kernel");
  if (gemm.has("rowwise_scaled")) {
    const ObjectReader r = gemm.object("rowwise_scaled", {"small_tile", "large_tile"});
    RowwiseScaledGemmSpec& out = hw.gemm.rowwise_scaled;
    out.small_tile = parse_tile(r.at("small_tile"), r.child_path("small_tile"));
    out.large_tile = parse_tile(r.at("large_tile"), r.child_path("large_tile"));
    if (out.small_tile.dtypes != out.large_tile.dtypes)
      fail_at(r.path(), "small_tile and large_tile must serve the same dtypes (one kernel family)");
  }

  if (gemm.has("library_rowwise")) hw.gemm.library_rowwise = parse_library_rowwise(gemm.object("library_rowwise", {"tile", "source"}), hw.gemm.tiles);
  if (gemm.has("slow_accumulation")) hw.gemm.slow_accumulation = gq.get("slow_accumulation", "fraction");

  const ObjectReader mem = root.object("memory", {"hbm_bandwidth", "hbm_efficiency", "sm_max_bandwidth", "capacity", "framework_reserved",
                                                   "l2_capacity", "l2_dirty_share"});
  const Quantities mq(mem);
  hw.memory.hbm_bytes_per_ps = mq.get("hbm_bandwidth", "bandwidth") * mq.get("hbm_efficiency", "fraction");
  hw.memory.sm_max_bytes_per_ps = mq.get("sm_max_bandwidth", "bandwidth");
  // Capacity only matters to a training step's memory ledger, which asks for it by name.
  if (mem.has("capacity") != mem.has("framework_reserved"))
    fail_at(mem.path(), "give \"capacity\" and \"framework_reserved\" together");
  if (mem.has("capacity")) {
    hw.memory.capacity_bytes = mq.get("capacity", "bytes");
    hw.memory.framework_reserved_bytes = mq.get("framework_reserved", "bytes");
    if (hw.memory.framework_reserved_bytes >= hw.memory.capacity_bytes)
      fail_at(mem.child_path("framework_reserved"), "must be less than capacity");
  }
  // Only a run that starts after a benchmark's flush (a clean or dirty L2) asks for these.
  if (mem.has("l2_capacity") != mem.has("l2_dirty_share"))
    fail_at(mem.path(), "give \"l2_capacity\" and \"l2_dirty_share\" together");
  if (mem.has("l2_capacity")) {
    hw.memory.l2_capacity_bytes = mq.get("l2_capacity", "bytes");
    hw.memory.l2_dirty_bytes = hw.memory.l2_capacity_bytes * mq.get("l2_dirty_share", "fraction");
  }

  const ObjectReader launch = root.object("launch", {"host_overhead", "eager_op_overhead", "eager_gemm_overhead", "device_latency",
                                                     "repeat_latency", "graph_device_latency", "cross_stream_latency"});
  hw.launch.host_overhead = Quantities(launch).time("host_overhead");
  hw.launch.eager_op_overhead = Quantities(launch).time("eager_op_overhead");
  hw.launch.eager_gemm_overhead = Quantities(launch).time("eager_gemm_overhead");
  hw.launch.device_latency = Quantities(launch).time("device_latency");
  hw.launch.repeat_latency = Quantities(launch).time("repeat_latency");
  hw.launch.graph_device_latency = Quantities(launch).time("graph_device_latency");
  hw.launch.cross_stream_latency = Quantities(launch).time("cross_stream_latency");

  const ObjectReader ce = root.object("copy_engines", {"count", "p2p_engines", "bandwidth", "latency"});
  const Quantities cq(ce);
  hw.copy_engines = {cq.count("count", 256), cq.count("p2p_engines", 256), cq.get("bandwidth", "bandwidth"), cq.time("latency")};
  if (hw.copy_engines.p2p_engines > hw.copy_engines.count)
    fail_at(ce.child_path("p2p_engines"), "cannot exceed copy_engines.count");

  hw.fabric = parse_fabric(root.object("fabric", {"topology", "nvlink", "pcie", "nic", "gpus_per_node"}));

  const ObjectReader nccl = root.object("nccl", {"max_channels", "p2p", "ring_startup", "registers_per_thread", "shared_memory", "protocols", "nvls",
                                                "channel_copy_bandwidth", "channel_reduce_bandwidth"});
  const Quantities nq(nccl);
  hw.nccl.max_channels = nq.count("max_channels", 1024);
  hw.nccl.ring_startup = nq.time("ring_startup");
  hw.nccl.registers_per_thread = nq.count("registers_per_thread");
  hw.nccl.shared_bytes = nq.bytes("shared_memory");
  const ObjectReader protos = nccl.object("protocols", {"LL", "LL128", "Simple"});
  for (const std::string name : {"LL", "LL128", "Simple"})
    if (protos.has(name))
      hw.nccl.protocols.push_back(parse_protocol(name, protos.object(name, {"base_latency", "step_latency", "bandwidth_efficiency", "threads_per_block", "channel_threshold", "startup"})));
  if (hw.nccl.protocols.empty()) fail_at(protos.path(), "needs at least one protocol");
  hw.nccl.p2p = parse_p2p(nccl.object("p2p", {"channels", "channels_per_peer", "channels_per_net_peer", "chunk_size", "net_chunk_size",
                                              "ll_threshold", "threads_per_block", "channel_bandwidth"}));
  if (!protos.has("LL") || !protos.has("Simple"))
    fail_at(protos.path(), "needs \"LL\" and \"Simple\": NCCL's send/recv runs one or the other (nccl.p2p.ll_threshold)");
  // A ring channel's copy and reduce rates come together or not at all.
  if (nccl.has("channel_copy_bandwidth") != nccl.has("channel_reduce_bandwidth"))
    fail_at(nccl.path(), "needs both \"channel_copy_bandwidth\" and \"channel_reduce_bandwidth\" or neither");
  if (nccl.has("channel_copy_bandwidth")) {
    hw.nccl.channel_copy_bytes_per_ps = nq.get("channel_copy_bandwidth", "bandwidth");
    hw.nccl.channel_reduce_bytes_per_ps = nq.get("channel_reduce_bandwidth", "bandwidth");
  }
  if (nccl.has("nvls")) {
    hw.nccl.nvls = parse_nvls(nccl.object("nvls", {"channels", "threads_per_block", "efficiency", "latency", "min_ranks"}), hw.fabric);
    if (!protos.has("Simple")) fail_at(nccl.child_path("nvls"), "NVLS runs NCCL's Simple protocol: nccl.protocols needs \"Simple\"");
  }

  if (root.has("cluster"))
    hw.cluster = parse_cluster(root.object("cluster", {"nic", "nodes_per_leaf", "oversubscription", "tree_bandwidth_ratio", "nccl_net_latency", "sharp"}),
                               hw.nccl);

  const ObjectReader bar = root.object("barrier", {"latency", "threads", "registers_per_thread"});
  const Quantities baq(bar);
  hw.barrier.latency = baq.time("latency");
  hw.barrier.block = {baq.count("threads"), baq.count("threads") * baq.count("registers_per_thread"), 0, 1};

  hardware_file::parse_memory_bound_kernels(root, hw);

  const ObjectReader at = root.object("attention", {"forward_efficiency", "backward_efficiency", "block_rows",
                                                    "flash2_forward_efficiency", "flash2_backward_efficiency",
                                                    "cudnn_forward_efficiency", "cudnn_backward_efficiency"});
  const Quantities aq(at);
  hw.attention.forward_efficiency = aq.get("forward_efficiency", "fraction");
  hw.attention.backward_efficiency = aq.get("backward_efficiency", "fraction");
  hw.attention.block_rows = aq.count("block_rows");
  // Other kernels' pairs, each optional: forward and backward together.
  for (const auto& [kernel, fwd, bwd] : {std::tuple{"flash2", &hw.attention.flash2_forward_efficiency, &hw.attention.flash2_backward_efficiency},
                                         std::tuple{"cudnn", &hw.attention.cudnn_forward_efficiency, &hw.attention.cudnn_backward_efficiency}}) {
    const std::string f = fmt::format("{}_forward_efficiency", kernel), b = fmt::format("{}_backward_efficiency", kernel);
    if (at.has(f) != at.has(b)) fail_at(at.path(), fmt::format("give {} and {} together", f, b));
    if (at.has(f)) *fwd = aq.get(f, "fraction"), *bwd = aq.get(b, "fraction");
  }

  // Optional: where absent, tensor-core kernels run at the rate the parameters give.
  if (root.has("power")) {
    const ObjectReader pw = root.object("power", {"limit", "tensor_sustained_draw", "speed_power_exponent", "burst_speed"});
    const Quantities pq(pw);
    hw.power.limit_w = pq.get("limit", "power");
    hw.power.tensor_sustained_w = pq.get("tensor_sustained_draw", "power");
    hw.power.speed_power_exponent = pq.get("speed_power_exponent", "ratio");
    if (pw.has("burst_speed")) hw.power.burst_speed = pq.get("burst_speed", "ratio");
  }

  // Every kind of block must fit an empty SM, or the simulation could never place it.
  const auto check_fits = [&](const BlockResources& b, const std::string& path) {
    const auto& c = hw.sm.capacity;
    if (b.threads > c.threads || b.registers > c.registers || b.shared_bytes > c.shared_bytes)
      fail_at(path, "block does not fit on one SM (threads, registers or shared memory)");
  };
  check_fits(hw.gemm.block, "$.gemm.block");
  check_fits(hw.barrier.block, "$.barrier");
  check_fits(hw.elementwise.block, "$.elementwise");
  for (const auto& p : hw.nccl.protocols)
    check_fits({p.threads, p.threads * hw.nccl.registers_per_thread, hw.nccl.shared_bytes, 1}, "$.nccl.protocols." + p.name);
  if (hw.nccl.nvls.present())
    check_fits({hw.nccl.nvls.threads, hw.nccl.nvls.threads * hw.nccl.registers_per_thread, hw.nccl.shared_bytes, 1}, "$.nccl.nvls");
  return hw;
}

HardwareSpec load_hardware_file(const std::string& file) {
  try {
    return parse_hardware(resolve_hardware_json(file), file);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
}

Json resolve_hardware_json(const std::string& file) {
  return resolve_base(read_json_file(file), fs::path(file).parent_path().string(), 0);
}

std::string models_dir() {
  if (const char* env = std::getenv("TPSIM_MODELS_DIR"); env && *env) return env;
  // An installed tpsim finds share/tpsim/models beside its bin/; a build tree, the sources'.
  if (const fs::path bin = executable_dir(); !bin.empty()) {
    const fs::path installed = bin.parent_path() / "share" / "tpsim" / "models";
    std::error_code ec;
    if (fs::is_directory(installed, ec)) return installed.string();
  }
  return std::string(TPSIM_SOURCE_DIR) + "/models";
}

std::string missing_dtype_message(const HardwareSpec& hw, Dtype d) {
  return fmt::format("hardware {} has no {} math (its compute.peak_dense lacks it)", hw.name, dtype_name(d));
}

std::vector<std::string> shipped_hardware_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(models_dir(), ec))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string hardware_file_path(const std::string& ref, const std::string& json_path, const std::string& relative_to) {
  const bool is_path = ref.find('/') != std::string::npos || (ref.size() > 5 && ref.ends_with(".json"));
  if (is_path) {
    const fs::path p = resolve_relative(ref, relative_to);
    if (!fs::exists(p)) fail_at(json_path, fmt::format("hardware file \"{}\" not found (as {})", ref, p.string()));
    return p.string();
  }
  const auto names = shipped_hardware_names();
  if (std::find(names.begin(), names.end(), ref) == names.end()) {
    std::string msg = fmt::format("unknown hardware \"{}\"", ref);
    if (auto s = closest_match(ref, names)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
    else msg += fmt::format(" (available: {})", fmt::join(names, ", "));
    fail_at(json_path, msg);
  }
  return models_dir() + "/" + ref + ".json";
}

HardwareSpec resolve_hardware(const std::string& ref, const std::string& json_path, const std::string& relative_to) {
  return load_hardware_file(hardware_file_path(ref, json_path, relative_to));
}

}  // namespace tpsim
