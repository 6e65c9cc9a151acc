#include "tpsim/step/expert_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "tpsim/step/all_to_all.hpp"
#include "tpsim/step/eager_moe_kernels.hpp"
#include "tpsim/step/group_layout.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/step_simulator.hpp"

namespace tpsim {

namespace {

std::int64_t rows(double slots) { return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(slots))); }

template <class Op>
void append(std::vector<std::pair<std::string, OpPayload>>& to, const std::vector<std::pair<std::string, Op>>& ks) {
  for (const auto& [name, op] : ks) to.push_back({name, op});
}

}  // namespace

double ExpertGroup::total_rows() const {
  if (expert_rows.empty()) return static_cast<double>(rows * batch);
  double sum = 0;
  for (std::int64_t r : expert_rows) sum += static_cast<double>(r);
  return sum;
}

// fp8 experts follow torchao's _Float8GroupedMM (torchao/prototype/moe_training/
// fp8_grouped_mm.py, 1926418): forward, the input is scaled per row and each expert's
// weight per output column, both cast to fp8 (tensor_to_scale then to_fp8_saturated: an
// amax pass and a cast pass over the bf16 tensor, fused into one read when compiled).
// Backward, for the input gradient the output gradient is cast per row and the weight
// again, transposed, by a Triton kernel; for the weight gradient the output gradient and
// the saved input are each copied column-major (`.t().contiguous().t()`) and cast per
// column within each expert's rows by a Triton kernel. The Triton kernels read their
// input twice (the amaxes, then the scaled cast).
std::vector<std::pair<std::string, OpPayload>> expert_group_ops(const ExpertGroup& g, bool backward, const std::string& tag) {
  const double e = dtype_bytes(g.dtype), f = dtype_bytes(g.linear), passes = g.compile ? 1 : 2;
  const double rows = g.total_rows(), batch = static_cast<double>(g.batch);
  // One GEMM of the experts: m or k is each expert's rows (ragged over unequal experts).
  const auto problem = [&](std::int64_t m, std::int64_t n, std::int64_t k, bool rows_are_k) {
    if (g.expert_rows.empty()) return GemmProblem{m, n, k, g.linear, g.batch, g.grouped};
    return ragged_grouped_problem(g.expert_rows, m, n, k, g.linear, rows_are_k);
  };
  const double act_in = rows * static_cast<double>(g.up * g.ffn) * e;
  const bool cast = g.linear != g.dtype;
  std::vector<std::pair<std::string, OpPayload>> ops;
  const auto cast_op = [&](const std::string& name, double elems, double reads) {
    if (cast) ops.push_back({name + tag, ElementwiseOp{reads * elems * e, elems * f}});
  };
  const auto column_major = [&](const std::string& name, double elems) {
    if (cast) ops.push_back({name + tag, ElementwiseOp{elems * e, elems * e}});
  };
  // One GEMM `in` [rows x k] x weight [k x n] -> [rows x n], forward or its two gradients.
  // `arrives_fp8`: the tokens (forward) or output gradients (backward) it multiplies were
  // cast before the all-to-all brought them (fp8 dispatch), so it casts them no more.
  const auto gemm = [&](const std::string& name, std::int64_t k, std::int64_t n, bool arrives_fp8) {
    const double in = rows * static_cast<double>(k), weight = batch * static_cast<double>(k) * static_cast<double>(n),
                 out = rows * static_cast<double>(n);
    if (!backward) {
      if (!arrives_fp8) cast_op(name + ".cast_input", in, passes);
      cast_op(name + ".cast_weight", weight, passes);
      ops.push_back({name + tag, GemmOp{problem(g.rows, n, k, false)}});
      return;
    }
    if (!arrives_fp8) cast_op(name + ".backward.cast_grad_output", out, passes);
    cast_op(name + ".backward.cast_weight_transposed", weight, 2);
    ops.push_back({name + ".backward_input" + tag, GemmOp{problem(g.rows, k, n, false)}});
    column_major(name + ".backward.grad_output_column_major", out);
    cast_op(name + ".backward.cast_grad_output_columns", out, 2);
    column_major(name + ".backward.input_column_major", in);
    cast_op(name + ".backward.cast_input_columns", in, 2);
    // A grouped weight gradient is grad_output^T x input ([n x k] per expert, transposed after):
    // autograd's for torch._grouped_mm returns it in the weight's layout, and torchtitan passes
    // its [E, out, in] weights transposed (column-major: _grouped_mm_mat2_backward), as torchao's
    // fp8 one computes it too. A grouped kernel's fixed tile sees the orientation.
    const bool output_first = g.grouped;
    ops.push_back({name + ".backward_weight" + tag,
                   GemmOp{problem(output_first ? n : k, output_first ? k : n, g.rows, true)}});
  };
  // The activation between them: eager SwiGLU's silu and mul kernels, or one fused pass.
  const auto activation = [&](const std::string& name) {
    if (g.aten && g.up == 2) {
      for (auto& [k, op] : aten_swiglu_kernels(rows * static_cast<double>(g.ffn), e, backward)) ops.push_back({name + "." + k + tag, op});
    } else if (!backward) {
      ops.push_back({name + tag, ElementwiseOp{act_in, act_in / static_cast<double>(g.up)}});
    } else {
      ops.push_back({name + tag, ElementwiseOp{act_in + act_in / static_cast<double>(g.up), act_in}});
    }
  };
  // torchtitan's experts (_run_experts_grouped_mm) multiply by w1 and w3 apart, a grouped
  // GEMM each, so backward sums their two input gradients (autograd's accumulation); a
  // batched kernel takes the gate and up projections as one GEMM of twice the width.
  const bool apart = g.grouped && g.up == 2;
  const auto up = [&](bool arrives_fp8) {
    if (!apart) return gemm("experts.up", g.hidden, g.up * g.ffn, arrives_fp8);
    gemm("experts.up.w1", g.hidden, g.ffn, arrives_fp8);
    gemm("experts.up.w3", g.hidden, g.ffn, arrives_fp8);
    const double x = rows * static_cast<double>(g.hidden) * e;
    if (backward) ops.push_back({"experts.up.input_grad_sum" + tag, ElementwiseOp{2 * x, x}});
  };
  if (!backward) {
    up(g.fp8_dispatch);
    activation("experts.activation");
    gemm("experts.down", g.ffn, g.hidden, false);
  } else {
    gemm("experts.down", g.ffn, g.hidden, g.fp8_dispatch);
    activation("experts.activation.backward");
    up(false);
  }
  return ops;
}

double distinct_nodes_per_token(std::int64_t experts, std::int64_t top_k, int nodes, int node_limit) {
  if (nodes <= 1 || top_k <= 0) return 1;
  const double chosen = node_limit > 0 ? std::min(node_limit, nodes) : nodes;
  const double per_node = static_cast<double>(experts) / nodes, candidates = chosen * per_node;
  // P(a chosen node gets none of the top_k): draws without replacement from the candidates.
  double miss = 1;
  for (std::int64_t i = 0; i < top_k; ++i) miss *= std::max(0.0, (candidates - per_node - static_cast<double>(i)) / (candidates - static_cast<double>(i)));
  return chosen * (1 - miss);
}

double ExpertLoad::busiest_slots_per_token(std::int64_t top_k) const {
  const double k = static_cast<double>(top_k);
  return sent_slots > 0 ? rank_slots(busiest_rank) / sent_slots * k : k;
}

double ExpertLoad::rank_slots(int rank) const {
  if (rank_share.empty()) return 0;
  double sum = 0;
  for (double x : rank_experts(rank)) sum += x;
  return sum;
}

std::vector<double> ExpertLoad::rank_experts(int rank) const {
  const std::size_t per = expert_slots.size() / rank_share.size(), first = per * static_cast<std::size_t>(rank);
  return {expert_slots.begin() + static_cast<std::ptrdiff_t>(first), expert_slots.begin() + static_cast<std::ptrdiff_t>(first + per)};
}

ExpertLoad expert_load(const TrainingStepSpec& t) {
  const auto& moe = t.model.moe;
  const int ep = t.mesh.size(MeshDim::ep);
  const auto experts = static_cast<std::size_t>(moe.experts);
  ExpertLoad l;
  if (experts == 0) return l;  // a dense model
  std::vector<double> share = t.expert_load;  // normalized by the parser
  if (share.empty()) {
    const double hot = (1 + t.expert_load_skew) / static_cast<double>(experts);
    share.assign(experts, experts > 1 ? (1 - hot) / static_cast<double>(experts - 1) : 1.0);
    share[0] = experts > 1 ? hot : 1.0;
  }
  l.sent_slots = static_cast<double>(t.rank_tokens()) * static_cast<double>(moe.top_k);
  const double total = l.sent_slots * ep;
  for (double x : share) l.expert_slots.push_back(total * x);
  const std::size_t per = experts / static_cast<std::size_t>(ep);
  l.rank_share.assign(static_cast<std::size_t>(ep), 0.0);
  for (std::size_t e = 0; e < experts; ++e) l.rank_share[e / per] += share[e];
  l.busiest_rank = static_cast<int>(std::max_element(l.rank_share.begin(), l.rank_share.end()) - l.rank_share.begin());
  return l;
}

// One rank's MoE layer in eager torchtitan's terms, per microbatch chunk: its router's
// tokens (its sequence shard), the slots it sends, the busiest rank's slots.
EagerMoeShape eager_moe_shape(const TrainingStepSpec& t, const ExpertLoad& load, Dtype dtype, int chunks) {
  const int tp = t.mesh.size(MeshDim::tp);
  EagerMoeShape s;
  s.tokens = static_cast<double>(std::max<std::int64_t>(1, t.rank_tokens() / tp));
  s.slots = load.sent_slots;
  s.computed = load.rank_slots(load.busiest_rank) / chunks;
  s.hidden = static_cast<double>(t.model.hidden);
  s.experts = static_cast<double>(t.model.moe.experts);
  s.local_experts = s.experts / t.mesh.size(MeshDim::ep);
  s.e = dtype_bytes(dtype);
  return s;
}

// The busiest rank's experts as grouped GEMMs: experts with the same token count (rows,
// per chunk) batched together, the largest first.
std::vector<std::pair<std::string, OpPayload>> busiest_rank_expert_ops(const TrainingStepSpec& t, Dtype dtype, bool backward, int chunks) {
  const int tp = t.mesh.size(MeshDim::tp);
  const std::int64_t h = t.model.hidden, ef = t.model.moe.expert_ffn_hidden / tp, up = t.model.ffn_up_projections();
  const Dtype linear = t.linear_dtype.value_or(dtype);
  const ExpertLoad load = expert_load(t);
  std::map<std::int64_t, std::int64_t, std::greater<>> batches;  // rows -> experts
  std::vector<std::int64_t> expert_rows;                         // in expert order
  for (double x : load.rank_experts(load.busiest_rank)) {
    ++batches[rows(x / chunks)];
    // In one grouped GEMM an expert no token chose is an empty group: no tiles.
    expert_rows.push_back(static_cast<std::int64_t>(std::ceil(x / chunks)));
  }
  std::vector<std::pair<std::string, OpPayload>> ops;
  // Eager torchtitan wraps its experts (expert_parallel): a permutation into expert order
  // before them, the way back after them (eager_moe_kernels).
  const EagerMoeShape shape = eager_moe_shape(t, load, dtype, chunks);
  if (t.aten_elementwise) append(ops, backward ? eager_moe_unpermute_kernels(shape, true) : eager_moe_permute_kernels(shape, false));
  const ExpertGroup group{0, 0, h, ef, up, dtype, linear, t.compile, t.moe_fp8_dispatch, t.aten_elementwise, t.grouped_expert_gemm};
  if (t.grouped_expert_gemm && batches.size() > 1) {
    // torchtitan's experts: one grouped GEMM over every local expert, whatever their loads.
    ExpertGroup g = group;
    g.batch = static_cast<std::int64_t>(expert_rows.size());
    g.expert_rows = expert_rows;
    g.rows = static_cast<std::int64_t>(g.total_rows()) / g.batch;
    append(ops, expert_group_ops(g, backward, ""));
  } else {
    for (const auto& [n, batch] : batches) {
      ExpertGroup g = group;
      g.rows = n, g.batch = batch;
      append(ops, expert_group_ops(g, backward, batches.size() == 1 ? "" : fmt::format(".rows{}", n)));
    }
  }
  if (t.aten_elementwise) append(ops, backward ? eager_moe_permute_kernels(shape, true) : eager_moe_unpermute_kernels(shape, false));
  return ops;
}

MoeLayerCost simulate_moe_layer(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool tp_collectives) {
  MoeLayerCost c;
  const auto& m = t.model;
  const int tp = t.mesh.size(MeshDim::tp), ep = t.mesh.size(MeshDim::ep);
  const double e = dtype_bytes(dtype);
  const std::int64_t tokens = t.rank_tokens(), h = m.hidden;
  const ExpertLoad load = expert_load(t);
  const double slots = load.rank_slots(load.busiest_rank);

  const auto experts = [&](bool backward, int chunks) { return kernels_alone(busiest_rank_expert_ops(t, dtype, backward, chunks), hw); };
  // Router on this rank's sequence shard, top-k and the permutation into expert order; after
  // the experts, the weighted sum back into token order.
  const std::int64_t shard = std::max<std::int64_t>(1, tokens / tp);
  const double token_bytes = static_cast<double>(tokens) * static_cast<double>(h) * e;
  const double slot_bytes = slots * static_cast<double>(h) * e;
  // With fp8 dispatch the tokens (forward) and the output gradients (backward) are cast
  // once per token, before they are duplicated into slots: an amax pass and a cast pass,
  // one fused kernel when compiled, as the experts' own casts (expert_group_ops).
  const double wire = t.moe_fp8_dispatch ? dtype_bytes(Dtype::fp8) * (1 + kFp8DispatchScaleBytes / kFp8DispatchScaleGroup) : e;
  const double token_elems = static_cast<double>(tokens) * static_cast<double>(h), passes = t.compile ? 1 : 2;
  std::vector<std::pair<std::string, OpPayload>> before_dispatch = {{"router", GemmOp{{shard, m.moe.experts, h, dtype}}}};
  std::vector<std::pair<std::string, OpPayload>> before_combine_b;
  if (t.moe_fp8_dispatch) {
    before_dispatch.push_back({"dispatch.cast_fp8", ElementwiseOp{passes * token_bytes, token_elems * wire}});
    before_combine_b.push_back({"combine.backward.cast_fp8", ElementwiseOp{passes * token_bytes, token_elems * wire}});
  }
  std::vector<std::pair<std::string, OpPayload>> after_combine, after_dispatch_b;
  if (t.aten_elementwise) {
    // Eager torchtitan: every aten op of the router, the reorder, the gather and the
    // weighted sum its own kernel (eager_moe_kernels); x's gradient sums the router's, the
    // gather's and (with them) the shared experts' parts.
    const EagerMoeShape shape = eager_moe_shape(t, load, dtype, 1);
    append(before_dispatch, eager_moe_route_kernels(shape, false));
    append(after_combine, eager_moe_combine_kernels(shape, false));
    append(before_combine_b, eager_moe_combine_kernels(shape, true));
    append(after_dispatch_b, eager_moe_route_kernels(shape, true));
    for (int i = 0; i < (tp_collectives ? 1 : 2); ++i) after_dispatch_b.push_back({"input_grad.sum", ElementwiseOp{2 * token_bytes, token_bytes}});
  } else {
    before_dispatch.push_back({"permute", ElementwiseOp{token_elems * wire, load.sent_slots * static_cast<double>(h) * wire}});
    before_combine_b.push_back({"unpermute.backward", ElementwiseOp{token_elems * wire, slots * static_cast<double>(h) * wire}});
    after_combine.push_back({"unpermute", ElementwiseOp{slot_bytes, token_bytes}});
    after_dispatch_b.push_back({"permute.backward", ElementwiseOp{load.sent_slots * static_cast<double>(h) * e, token_bytes}});
  }
  after_dispatch_b.push_back({"router.backward_input", GemmOp{{shard, h, m.moe.experts, dtype}}});
  after_dispatch_b.push_back({"router.backward_weight", GemmOp{{h, m.moe.experts, shard, dtype}}});
  const Tick route_f = kernels_alone(before_dispatch, hw);
  const Tick combine_f = kernels_alone(after_combine, hw);
  const Tick route_b = kernels_alone(after_dispatch_b, hw);
  const Tick combine_b = kernels_alone(before_combine_b, hw);

  const int leaf = hw.cluster.present() ? hw.cluster.nodes_per_leaf : 0;
  const int chunks = ep > 1 ? t.moe_dispatch_chunks : 1;
  // Dispatch: every rank sends each token slot to its expert's rank; combine returns them.
  // Backward, the output gradients travel like the dispatch and the input gradients like
  // the combine. Priced as flows (step/all_to_all): the busiest rank's NIC receives the
  // most in a dispatch, while its combine leaves through its node's NICs together.
  GroupCollectiveCost dispatch, combine;
  if (ep > 1) {
    const GroupLayout g = group_layout(t.mesh, MeshDim::ep, hw.fabric.gpus_per_node, leaf);
    AllToAllTraffic traffic{load.sent_slots * static_cast<double>(h) * wire / chunks, load.rank_share, false};
    traffic.node_forwarding = t.moe_node_forwarding;
    traffic.network_fraction = distinct_nodes_per_token(m.moe.experts, m.moe.top_k, g.nodes, t.moe_node_limit) / static_cast<double>(m.moe.top_k);
    c.dispatch_bytes = traffic.sent_bytes * chunks;
    dispatch = all_to_all_cost(g, traffic, hw);
    const double dispatch_sent = traffic.sent_bytes;
    traffic.gather_back = true;
    traffic.sent_bytes = load.sent_slots * static_cast<double>(h) * e / chunks;  // the combines stay in the activation dtype
    combine = all_to_all_cost(g, traffic, hw);
    const std::string each = chunks > 1 ? ", one chunk" : "";
    c.collectives.push_back({"ep", "all_to_all (dispatch" + each + ")", dispatch_sent, dispatch});
    c.collectives.push_back({"ep", "all_to_all (combine" + each + ")", traffic.sent_bytes, combine});
  }
  c.dispatch = dispatch.time, c.combine = combine.time;
  Tick tpc = 0, ag_time = 0, rs_time = 0;
  if (tp_collectives && tp > 1) {
    const GroupLayout g = group_layout(t.mesh, MeshDim::tp, hw.fabric.gpus_per_node, leaf);
    const GroupCollectiveCost ag = group_collective_cost(GroupOp::all_gather, token_bytes, g, hw);
    const GroupCollectiveCost rs = group_collective_cost(GroupOp::reduce_scatter, token_bytes, g, hw);
    c.collectives.push_back({"tp", "all_gather (MoE input)", token_bytes, ag});
    c.collectives.push_back({"tp", "reduce_scatter (MoE output)", token_bytes, rs});
    ag_time = ag.time, rs_time = rs.time;
    tpc = ag.time + rs.time;
  }
  c.forward_tp = c.backward_tp = tpc;
  if (chunks > 1) {
    // Chunked: the first all-to-all of every chunk is issued at once, and each chunk's experts
    // start when its tokens have arrived, so later chunks' transfers run under earlier chunks'
    // experts (the NCCL kernels hold SMs meanwhile); the second all-to-alls follow on the
    // same NCCL stream.
    const auto pipelined = [&](std::vector<LayerPhase>& phases, Tick before, Tick after, const std::string& first,
                               const std::string& second, Tick experts_chunk, Tick& exposed) {
      StepProgram p;
      p.sm_count = hw.sm.count;
      Tick compute_alone = 0;
      const auto compute = [&](std::string name, Tick work, std::vector<int> deps) {
        StepTask task;
        task.name = std::move(name);
        task.work = work;
        task.deps = std::move(deps);
        compute_alone += work;
        return p.add(std::move(task));
      };
      // The first all-to-all of each direction is dispatch-shaped (to the experts' ranks), the second combine-shaped.
      const auto transfer = [&](std::string name, const GroupCollectiveCost& cost, std::vector<int> deps) {
        return p.add(communication_task(StepStream::ep, std::move(name), "ep", cost, std::move(deps)));
      };
      const int start = compute("before", before, {});
      std::vector<int> arrived;
      for (int i = 0; i < chunks; ++i) arrived.push_back(transfer(fmt::format("{}.chunk{}", first, i), dispatch, {start}));
      int last = -1;
      for (int i = 0; i < chunks; ++i) {
        const int done = compute(fmt::format("experts.chunk{}", i), experts_chunk, {arrived[static_cast<std::size_t>(i)]});
        last = transfer(fmt::format("{}.chunk{}", second, i), combine, {done});
      }
      compute("after", after, {last});
      const StepSimulation sim = simulate_step(p);
      for (std::size_t i = 0; i < p.tasks.size(); ++i)
        if (p.tasks[i].communication)
          phases.push_back({p.tasks[i].name, "ep", ag_time + sim.times[i].start, sim.times[i].end - sim.times[i].start});
      exposed = sim.makespan > compute_alone ? sim.makespan - compute_alone : 0;
      return sim.makespan;
    };
    const auto tp_phase = [&](std::vector<LayerPhase>& phases, const std::string& name, Tick at, Tick d) {
      if (d > 0) phases.push_back({name, "tp", at, d});
    };
    tp_phase(c.forward_phases, "tp.all_gather.moe_input", 0, ag_time);
    const Tick f = pipelined(c.forward_phases, route_f, combine_f, "ep.all_to_all.dispatch", "ep.all_to_all.combine", experts(false, chunks),
                             c.forward_all_to_all);
    tp_phase(c.forward_phases, "tp.reduce_scatter.moe_output", ag_time + f, rs_time);
    c.forward = ag_time + f + rs_time;
    tp_phase(c.backward_phases, "tp.all_gather.moe_output.backward", 0, ag_time);
    const Tick b = pipelined(c.backward_phases, combine_b, route_b, "ep.all_to_all.combine.backward", "ep.all_to_all.dispatch.backward",
                             experts(true, chunks), c.backward_all_to_all);
    tp_phase(c.backward_phases, "tp.reduce_scatter.moe_input.backward", ag_time + b, rs_time);
    c.backward = ag_time + b + rs_time;
    return c;
  }
  c.forward_all_to_all = c.backward_all_to_all = dispatch.time + combine.time;
  // The block runs in order; its communication phases fall where the sequence puts them.
  const auto sequence = [&](std::vector<LayerPhase>& phases, const std::vector<std::pair<std::string, Tick>>& steps) {
    Tick now = 0;
    for (const auto& [name, d] : steps) {
      if (d > 0 && !name.empty()) phases.push_back({name, name.rfind("tp.", 0) == 0 ? "tp" : "ep", now, d});
      now += d;
    }
    return now;
  };
  const Tick ag = ag_time, rs = rs_time;
  c.forward = sequence(c.forward_phases, {{"tp.all_gather.moe_input", ag}, {"", route_f}, {"ep.all_to_all.dispatch", dispatch.time},
                                          {"", experts(false, 1)}, {"ep.all_to_all.combine", combine.time}, {"", combine_f},
                                          {"tp.reduce_scatter.moe_output", rs}});
  c.backward = sequence(c.backward_phases, {{"tp.all_gather.moe_output.backward", ag}, {"", combine_b},
                                            {"ep.all_to_all.combine.backward", dispatch.time}, {"", experts(true, 1)},
                                            {"ep.all_to_all.dispatch.backward", combine.time}, {"", route_b},
                                            {"tp.reduce_scatter.moe_input.backward", rs}});
  return c;
}

}  // namespace tpsim
