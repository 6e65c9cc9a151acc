#include "gemm_row.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"

namespace tpsim {

Dtype parse_dtype_at(const ObjectReader& r) {
  const std::string s = r.string("dtype");
  if (auto d = parse_dtype(s)) return *d;
  fail_at(r.child_path("dtype"), fmt::format("unknown dtype \"{}\" (bf16, fp16, fp32 or fp8)", s));
}

std::int64_t row_dimension(const ObjectReader& r, const std::string& key) {
  const std::int64_t v = r.positive_int(key);
  if (v > kMaxDimension) fail_at(r.child_path(key), fmt::format("{} is larger than the limit {}", v, kMaxDimension));
  return v;
}

namespace {

// A thread-block cluster as "2x4": CTAs along C's rows x columns, at most 16 in all.
GemmProblem::Cluster cluster_at(const ObjectReader& r, const std::string& key) {
  const std::string text = r.string(key);
  const auto extents = parse_extents(text, 2, kMaxClusterCtas);
  if (!extents || (*extents)[0] * (*extents)[1] > kMaxClusterCtas)
    fail_at(r.child_path(key), fmt::format("must look like \"2x4\" (CTAs along rows x columns, at most {} in all), got \"{}\"",
                                           kMaxClusterCtas, text));
  return {(*extents)[0], (*extents)[1]};
}

// The plan the vendor library ran, as the row names it ("plan": {"tile": "64x128x64",
// "split_k": 2}): tpsim prices that tile and split instead of choosing its own.
GemmProblem::NamedPlan parse_named_plan(const ObjectReader& row, const GemmProblem& p) {
  const ObjectReader r = row.object("plan", {"tile", "split_k", "cluster"});
  if (p.grouped) fail_at(row.child_path("plan"), "a grouped GEMM's tile is PyTorch's dispatch's, not a library plan");
  GemmProblem::NamedPlan n;
  const std::string tile = r.string("tile");
  const auto extents = parse_extents(tile, 3, 1024);
  if (!extents)
    fail_at(r.child_path("tile"), fmt::format("must look like \"64x128x64\" (rows x columns x depth, each 1 to 1024), got \"{}\"", tile));
  n.tile_m = (*extents)[0], n.tile_n = (*extents)[1], n.tile_k = (*extents)[2];
  const std::int64_t split = r.has("split_k") ? r.positive_int("split_k") : 1;
  if (split > 1024) fail_at(r.child_path("split_k"), fmt::format("{} slices is more than the limit 1024", split));
  if (split > p.k) fail_at(r.child_path("split_k"), fmt::format("{} slices of a K of {}", split, p.k));
  n.split_k = static_cast<int>(split);
  if (r.has("cluster")) {
    n.cluster = cluster_at(r, "cluster");
  }
  return n;
}

// How torch._scaled_mm ran an fp8 GEMM: "scaling" tensorwise (one scale per operand) or rowwise
// (cuBLAS's outer-vector-scaled kernels), "fast_accumulation" its use_fast_accum (absent: off,
// torch._scaled_mm's default).
void parse_fp8_execution(const ObjectReader& r, GemmProblem& p) {
  const char* key = r.has("scaling") ? "scaling" : "fast_accumulation";
  if (p.dtype != Dtype::fp8) fail_at(r.child_path(key), "only an fp8 GEMM (torch._scaled_mm) has scales and an accumulation mode");
  if (p.grouped) fail_at(r.child_path(key), "a grouped fp8 GEMM's kernel is PyTorch's, with its own tiles and accumulation");
  if (r.has("scaling")) {
    const std::string s = r.string("scaling");
    if (s != "tensorwise" && s != "rowwise") fail_at(r.child_path("scaling"), fmt::format("unknown scaling \"{}\" (tensorwise or rowwise)", s));
    p.scaled_mm.rowwise_scales = s == "rowwise";
  }
  p.scaled_mm.fast_accumulation = r.optional_bool("fast_accumulation").value_or(false);
}

// Which of cuBLASLt's algorithms the row timed ("heuristic_rank": 0 is the heuristic's first
// choice, what cuBLAS runs). Another is priced at the plan it names, so it must name one.
void parse_heuristic_rank(const ObjectReader& r, GemmProblem& p) {
  const std::int64_t rank = r.non_negative_int("heuristic_rank");
  if (rank >= GemmProblem::kHeuristicAlgorithms)
    fail_at(r.child_path("heuristic_rank"), fmt::format("{} is past the heuristic's first {} algorithms", rank, GemmProblem::kHeuristicAlgorithms));
  if (rank > 0 && !p.named_plan.given())
    fail_at(r.child_path("heuristic_rank"), "a row that timed another algorithm than the heuristic's first must name its \"plan\" (tile and split_k)");
  p.heuristic_rank = static_cast<int>(rank);
}

// The thread-block cluster the row made the algorithm run in ("cluster": "2x4"). Priced at the
// plan the row names, so it must name one; the plan ran in that cluster.
void parse_cluster(const ObjectReader& r, GemmProblem& p) {
  const GemmProblem::Cluster c = cluster_at(r, "cluster");
  if (!p.named_plan.given())
    fail_at(r.child_path("cluster"), "a row that made its algorithm run in another cluster must name its \"plan\" (tile and split_k)");
  if (p.named_plan.cluster.given() && p.named_plan.cluster != c)
    fail_at(r.child_path("cluster"), fmt::format("the row made its algorithm run in clusters of {}x{}, its plan says {}x{}", c.m, c.n,
                                                 p.named_plan.cluster.m, p.named_plan.cluster.n));
  p.cluster = c;
  p.named_plan.cluster = c;
}

// A grouped GEMM over groups of unequal size (torch._grouped_mm's offsets of unequal experts):
// `group_sizes` along m, or along k with `"ragged": "k"` (a weight gradient); `batch` is their
// count and m (or k) their mean rounded down, as PyTorch's dispatch computes it.
void parse_group_sizes(const ObjectReader& r, GemmProblem& p) {
  if (!p.grouped) fail_at(r.child_path(r.has("group_sizes") ? "group_sizes" : "ragged"), "only a \"grouped\" GEMM has groups of unequal size");
  if (!r.has("group_sizes")) fail_at(r.child_path("ragged"), "needs \"group_sizes\"");
  const std::string path = r.child_path("group_sizes");
  const Json& v = r.at("group_sizes");
  if (!v.is_array() || v.size() != static_cast<std::size_t>(p.batch))
    fail_at(path, fmt::format("must be an array of {} sizes (one per group of \"batch\")", p.batch));
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < 1 || v[i].get<std::int64_t>() > kMaxDimension)
      fail_at(fmt::format("{}[{}]", path, i), fmt::format("must be a whole number from 1 to {}, got {}", kMaxDimension, v[i].dump()));
    sizes.push_back(v[i].get<std::int64_t>());
  }
  bool ragged_k = false;
  if (r.has("ragged")) {
    const std::string dim = r.string("ragged");
    if (dim != "m" && dim != "k") fail_at(r.child_path("ragged"), fmt::format("must be \"m\" or \"k\", got \"{}\"", dim));
    ragged_k = dim == "k";
  }
  const GemmProblem g = ragged_grouped_problem(sizes, p.m, p.n, p.k, p.dtype, ragged_k);
  const char* key = ragged_k ? "k" : "m";
  if ((ragged_k ? p.k : p.m) != (ragged_k ? g.k : g.m))
    fail_at(r.child_path(key), fmt::format("must be the groups' mean size rounded down, {}", ragged_k ? g.k : g.m));
  p = g;
}

}  // namespace

GemmProblem parse_gemm_row(const ObjectReader& r, const std::string& path) {
  GemmProblem g{row_dimension(r, "m"), row_dimension(r, "n"), row_dimension(r, "k"), parse_dtype_at(r)};
  if (r.has("batch")) g.batch = row_dimension(r, "batch");
  // torch._grouped_mm's groups: the batch runs in PyTorch's grouped kernel.
  g.grouped = r.optional_bool("grouped").value_or(false);
  if (g.grouped && g.batch < 2) fail_at(r.child_path("grouped"), "a grouped GEMM needs a \"batch\" of at least 2 groups");
  if (r.has("group_sizes") || r.has("ragged")) parse_group_sizes(r, g);
  if (r.has("scaling") || r.has("fast_accumulation")) parse_fp8_execution(r, g);
  if (r.has("plan")) g.named_plan = parse_named_plan(r, g);
  if (r.has("heuristic_rank")) parse_heuristic_rank(r, g);
  if (r.has("cluster")) parse_cluster(r, g);
  check_gemm_fits(g.m, g.n, g.k, path, g.batch);
  return g;
}

void write_gemm_row(const GemmProblem& g, Json& j) {
  j["m"] = g.m;
  j["n"] = g.n;
  j["k"] = g.k;
  j["dtype"] = std::string(dtype_name(g.dtype));
  if (g.batch > 1) j["batch"] = g.batch;
  if (g.grouped) j["grouped"] = true;
  if (g.ragged()) {
    j["group_sizes"] = g.group_sizes;
    if (g.ragged_k) j["ragged"] = "k";
  }
  if (const auto& n = g.named_plan; n.given()) {
    j["plan"] = {{"tile", fmt::format("{}x{}x{}", n.tile_m, n.tile_n, n.tile_k)}};
    if (n.split_k > 1) j["plan"]["split_k"] = n.split_k;
    if (n.cluster.given() && !g.cluster.given()) j["plan"]["cluster"] = fmt::format("{}x{}", n.cluster.m, n.cluster.n);
  }
  if (g.scaled_mm.rowwise_scales) j["scaling"] = "rowwise";
  if (g.scaled_mm.fast_accumulation) j["fast_accumulation"] = true;
  if (g.heuristic_rank > 0) j["heuristic_rank"] = g.heuristic_rank;
  if (g.cluster.given()) j["cluster"] = fmt::format("{}x{}", g.cluster.m, g.cluster.n);
}

}  // namespace tpsim
