#include "tpsim/step/layer_costs.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "tpsim/analysis/metrics.hpp"
#include "tpsim/runtime/executor.hpp"
#include "tpsim/step/context_parallel.hpp"
#include "tpsim/step/expert_parallel.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/step/group_layout.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/op_checkpoint.hpp"
#include "tpsim/step/output_layer.hpp"
#include "tpsim/step/weight_gradients.hpp"
#include "tpsim/strategies/eager_kernels.hpp"
#include "tpsim/strategies/registry.hpp"
#include "tpsim/strategies/unfused_attention.hpp"

namespace tpsim {

namespace {

Tick makespan(const Dag& dag, const HardwareSpec& hw) {
  const Timeline tl = execute(dag, hw, false);
  return analyze(dag, tl).makespan;
}

// The TP group's layer workload: "transformer_layer", or for a MoE layer its "attention" and
// the shared experts as an "ffn" of their combined width.
struct LayerPart {
  std::string op = "transformer_layer";
  std::int64_t ffn_hidden = 0;  // 0: the model's
};

Scenario layer_scenario(const Scenario& s, Pass pass, int layers, const LayerPart& part) {
  const TrainingStepSpec& t = s.workload.step;
  Scenario sub;
  sub.name = s.name;
  sub.hardware = s.hardware;
  sub.gpus = t.mesh.size(MeshDim::tp);
  // A TP group across nodes: its GPUs in each node share NVSwitch, the nodes meet through
  // the cluster NICs (one per GPU), as the multi_node topology lays out.
  const GroupLayout tp = group_layout(t.mesh, MeshDim::tp, s.hardware.fabric.gpus_per_node, 0);
  if (tp.crosses_nodes()) {
    sub.hardware.fabric.topology = "multi_node";
    sub.hardware.fabric.gpus_per_node = tp.per_node;
    sub.hardware.fabric.nic = s.hardware.cluster.nic;
  }
  sub.dtype = s.dtype;
  sub.software = s.software;
  sub.workload.op = part.op;
  sub.workload.model = t.model;
  if (part.ffn_hidden > 0) sub.workload.model.ffn_hidden = part.ffn_hidden;
  // With context parallelism the TP group holds 1/cp of the tokens, and its layer runs the
  // first (local) block of the attention loop; the rest comes from the CP simulation.
  sub.workload.tokens = t.rank_tokens();
  sub.workload.seq_len = t.seq_len / t.mesh.size(MeshDim::cp);
  sub.workload.pass = pass;
  sub.workload.layers = layers;
  sub.workload.linear_dtype = t.linear_dtype;
  sub.workload.compile = t.compile;
  sub.workload.aten_elementwise = t.aten_elementwise;
  sub.workload.fused_norm = t.fused_norm;
  sub.workload.weights_in_linear_dtype = t.weights_gathered_in_fp8();
  sub.workload.tp_gathers_in_linear_dtype = t.tp_fp8_all_gather;
  sub.workload.fp8 = t.fp8;
  sub.workload.sequence_parallel = t.sequence_parallel;
  sub.workload.tp_saves_gathered_input = t.tp_saves_gathered_input;
  sub.workload.batch_first = t.batch_first;
  sub.workload.attention = t.attention;
  return sub;
}

struct PassCost {
  Tick time = 0, exposed = 0;       // per layer in steady state; TP communication left exposed
  std::vector<LayerPhase> phases;   // its TP regions' communication on rank 0
  Tick attention_start = 0;         // when its attention kernel starts (CP's loop runs from there)
  PerTier tp_bytes;                 // what rank 0 sends per layer, inside its node and to others
  TimeByKind kinds;                 // `time` split as the one-layer run's critical path on rank 0 is
};

// A TP region's name: the op name up to its first communication step ("attention.qkv" of
// "attention.qkv.pull.shard1" or "attention.qkv.all_gather").
std::string region_of(const std::string& op) {
  static const std::vector<std::string> verbs = {"all_gather", "reduce_scatter", "all_reduce", "barrier", "pull", "push", "copy",
                                                 "send", "recv", "sendrecv", "ring", "step", "fused", "reduce"};
  std::string region;
  std::size_t from = 0;
  while (from <= op.size()) {
    const std::size_t dot = std::min(op.find('.', from), op.size());
    const std::string part = op.substr(from, dot - from);
    if (std::find(verbs.begin(), verbs.end(), part) != verbs.end()) break;
    region += (region.empty() ? "" : ".") + part;
    from = dot + 1;
  }
  return region.empty() ? op : region;
}

// Per layer in steady state: the second layer's increment, so the first launch's ramp
// is not charged to every layer. Also the TP communication a layer leaves exposed, and
// where each region's communication falls.
PassCost per_layer(const Scenario& s, const std::string& variant, Pass pass, const LayerPart& part = {}) {
  const Scenario one_layer = layer_scenario(s, pass, 1, part);
  const Dag one_dag = build_layer_dag(one_layer, variant);
  // The TP group's own fabric (across nodes when the group spans them).
  const HardwareSpec& hw = one_layer.hardware;
  const Timeline tl = execute(one_dag, hw, false);
  const VariantMetrics one = analyze(one_dag, tl);
  const Tick two = makespan(build_layer_dag(layer_scenario(s, pass, 2, part), variant), hw);
  PassCost c{two > one.makespan ? two - one.makespan : one.makespan, one.exposed_comm, {}, 0, {}, {}};
  // Named for the step: the layer's communication on its critical path is its TP group's.
  for (const auto& [kind, ps] : scaled_to(one.critical_path.by_kind, c.time)) {
    static const std::map<std::string, std::string> tp_kinds = {
        {"collective", "tp collectives"}, {"copy", "tp copies"}, {"sendrecv", "tp send/recv"}, {"barrier", "tp barriers"},
        {"layout_copy", "tp layout copies"}};
    const auto it = tp_kinds.find(kind);
    c.kinds[it == tp_kinds.end() ? kind : it->second] += ps;
  }
  if (!tl.egress_bytes.empty()) {
    c.tp_bytes.nic = tl.egress_bytes_across_nodes[0];
    c.tp_bytes.nvlink = tl.egress_bytes[0] - c.tp_bytes.nic;
  }
  std::map<std::string, std::pair<Tick, Tick>> spans;  // region -> first start, last end
  std::vector<std::string> order;
  for (OpId id : one_dag.program(0)) {
    const Op& op = one_dag.op(id);
    const OpTiming& ot = tl.ops[id];
    if (std::holds_alternative<AttentionOp>(op.payload)) c.attention_start = ot.start;
    const OpClass k = op_class(op);
    if (k != OpClass::communication && k != OpClass::synchronization) continue;
    const std::string region = "tp." + region_of(op.name);
    auto [it, fresh] = spans.try_emplace(region, ot.start, ot.end);
    if (fresh) order.push_back(region);
    it->second.first = std::min(it->second.first, ot.start);
    it->second.second = std::max(it->second.second, ot.end);
  }
  for (const auto& r : order) c.phases.push_back({r, "tp", spans[r].first, spans[r].second - spans[r].first});
  return c;
}

// `phases` shifted by `by`, appended to `out`.
void append(std::vector<LayerPhase>& out, const std::vector<LayerPhase>& phases, Tick by) {
  for (LayerPhase p : phases) {
    p.start += by;
    out.push_back(std::move(p));
  }
}

// A pass's TP phases with CP's loop put in at its attention: what follows moves by the loop's extra time.
std::vector<LayerPhase> with_cp(const PassCost& pass, const CpAttentionCost& cp) {
  std::vector<LayerPhase> out;
  for (LayerPhase p : pass.phases) {
    if (p.start > pass.attention_start) p.start += cp.extra();
    out.push_back(std::move(p));
  }
  append(out, cp.phases, pass.attention_start);
  return out;
}

Tick elementwise_time(const HardwareSpec& hw, const std::vector<ElementwiseOp>& ops) {
  Dag dag(1);
  for (std::size_t i = 0; i < ops.size(); ++i) dag.add(0, 0, "elementwise", ops[i]);
  return ops.empty() ? 0 : makespan(dag, hw);
}

}  // namespace

// How the per-op policy's recomputed all-gathers run: under async TP, torch.compile's
// micro-pipeline pass fuses each with the recomputed linears that read it (a gather region of
// those linears, as the variant builds it on the TP group); otherwise NCCL's (empty).
namespace {
FusedGather fused_gather(const Scenario& s, const std::string& variant) {
  if (!variant_is_micro_pipeline(variant)) return {};
  return [&s, variant](std::int64_t tokens, std::int64_t in, const std::vector<std::int64_t>& outs, Dtype dtype) {
    Scenario region = layer_scenario(s, Pass::forward, 1, {});
    region.dtype = dtype;
    region.workload.op = "allgather_matmul";
    region.workload.m = tokens, region.workload.k = in, region.workload.n = outs;
    return makespan(build_region_dag(region, variant, RegionKind::gather), region.hardware);
  };
}
}  // namespace

LayerCosts simulate_layer_costs(const Scenario& s, const std::string& variant) {
  const TrainingStepSpec& t = s.workload.step;
  const HardwareSpec& hw = s.hardware;
  const int tp = t.mesh.size(MeshDim::tp);
  const double e = dtype_bytes(s.dtype);
  const std::int64_t tokens = t.rank_tokens(), rows = tokens / tp;
  const std::int64_t h = t.model.hidden, f = t.model.ffn_hidden / tp;
  LayerCosts c;
  const PassCost lf = per_layer(s, variant, Pass::forward), lb = per_layer(s, variant, Pass::backward);
  c.forward = lf.time, c.forward_exposed_comm = lf.exposed;
  c.backward = lb.time, c.backward_exposed_comm = lb.exposed;
  c.forward_tp_bytes = lf.tp_bytes, c.backward_tp_bytes = lb.tp_bytes;
  CpAttentionCost cpf, cpb;  // empty without context parallelism
  if (t.mesh.size(MeshDim::cp) > 1) {
    cpf = simulate_cp_attention(t, hw, s.dtype, false), cpb = simulate_cp_attention(t, hw, s.dtype, true);
    c.cp_forward_exposed = cpf.exposed();
    c.cp_backward_exposed = cpb.exposed();
    c.cp_collectives = cpf.collectives;
    for (const auto& x : cpb.collectives)
      if (x.op != cpf.collectives.front().op) c.cp_collectives.push_back(x);
  }
  const Tick cp_forward = cpf.extra(), cp_backward = cpb.extra();
  c.forward += cp_forward;
  c.backward += cp_backward;
  // CP's attention loop beyond the block the layer run computes.
  c.forward_kinds = lf.kinds + TimeByKind{{"cp attention loop", cp_forward}};
  c.backward_kinds = lb.kinds + TimeByKind{{"cp attention loop", cp_backward}};
  c.forward_phases = with_cp(lf, cpf);
  c.backward_phases = with_cp(lb, cpb);
  // Selective checkpointing recomputes the norm outputs and the FFN activation (GEMM outputs
  // kept): the same kernels as the layer's forward (strategies/layer.cpp).
  const auto selective = [&](double activation_rows, std::int64_t width) {
    if (t.aten_elementwise) {
      std::vector<std::pair<std::string, OpPayload>> ops;
      for (int norm = 0; norm < 2; ++norm)
        for (const auto& [k, op] : aten_rmsnorm_kernels(static_cast<double>(rows * h), static_cast<double>(rows), e, false)) ops.emplace_back(k, op);
      if (t.model.gated_ffn)
        for (const auto& [k, op] : aten_swiglu_kernels(activation_rows * static_cast<double>(width), e, false)) ops.emplace_back(k, op);
      else
        ops.emplace_back("gelu", ElementwiseOp{activation_rows * width * e, activation_rows * width * e});
      return kernels_alone(ops, hw);
    }
    return elementwise_time(hw, {ElementwiseOp{rows * h * e, rows * h * e}, ElementwiseOp{rows * h * e, rows * h * e},
                                 ElementwiseOp{t.model.ffn_up_projections() * activation_rows * width * e, activation_rows * width * e}});
  };
  // With unfused attention, selective recomputes the attention core instead (Megatron-LM,
  // Korthikanti et al. 2022): its forward kernels again, ahead of the layer's backward.
  const auto attention_core = [&] {
    const AttentionOp a{tokens, t.seq_len, t.model.heads / tp, std::max<std::int64_t>(1, t.model.kv_heads / tp), t.model.head_dim,
                        true, false, s.dtype};
    return kernels_alone(unfused_attention_kernels(a, t.attention.dropout), hw);
  };
  switch (t.checkpoint) {
    case Checkpointing::none: break;
    case Checkpointing::full: c.recompute = c.forward, c.recompute_tp_bytes = c.forward_tp_bytes; break;
    case Checkpointing::selective:
      c.recompute = t.attention.impl == AttentionImpl::unfused ? attention_core() : selective(static_cast<double>(tokens), f);
      break;
    case Checkpointing::selective_op: c.recompute = op_checkpoint_recompute(t, hw, s.dtype, false, fused_gather(s, variant)); break;
  }
  c.recompute_kinds = t.checkpoint == Checkpointing::full ? c.forward_kinds : TimeByKind{{"recompute", c.recompute}};
  if (t.model.is_moe()) {
    // A MoE layer: attention, the shared experts as a dense FFN of their combined width, and
    // the routed experts (expert_parallel).
    LayerMoeCosts& m = c.moe.emplace();
    const LayerPart attention{"attention", 0};
    const PassCost af = per_layer(s, variant, Pass::forward, attention), ab = per_layer(s, variant, Pass::backward, attention);
    m.forward = af.time + cp_forward, m.backward = ab.time + cp_backward;
    m.forward_kinds = af.kinds + TimeByKind{{"cp attention loop", cp_forward}};
    m.backward_kinds = ab.kinds + TimeByKind{{"cp attention loop", cp_backward}};
    m.tp_forward_exposed = af.exposed, m.tp_backward_exposed = ab.exposed;
    m.forward_tp_bytes = af.tp_bytes, m.backward_tp_bytes = ab.tp_bytes;
    // Forward: attention, shared experts, routed experts; backward the other way round.
    m.forward_phases = with_cp(af, cpf);
    std::vector<LayerPhase> ffn_backward;
    Tick ffn_backward_time = 0;
    const std::int64_t shared = t.model.moe.shared_width();
    if (shared > 0) {
      const LayerPart ffn{"ffn", shared};
      const PassCost sf = per_layer(s, variant, Pass::forward, ffn), sb = per_layer(s, variant, Pass::backward, ffn);
      append(m.forward_phases, sf.phases, m.forward);
      ffn_backward = sb.phases;
      ffn_backward_time = sb.time;
      m.forward += sf.time, m.backward += sb.time, m.tp_forward_exposed += sf.exposed, m.tp_backward_exposed += sb.exposed;
      m.forward_kinds += sf.kinds, m.backward_kinds += sb.kinds;
      m.forward_tp_bytes += sf.tp_bytes, m.backward_tp_bytes += sb.tp_bytes;
    }
    const MoeLayerCost r = simulate_moe_layer(t, hw, s.dtype, shared == 0);
    append(m.forward_phases, r.forward_phases, m.forward);
    append(ffn_backward, r.backward_phases, ffn_backward_time);
    append(ffn_backward, with_cp(ab, cpb), ffn_backward_time + r.backward);
    m.backward_phases = std::move(ffn_backward);
    m.forward += r.forward;
    m.backward += r.backward;
    // The routed experts' pass: its all-to-alls (nothing hides them) and the rest.
    m.forward_kinds += TimeByKind{{"ep all-to-all", r.forward_all_to_all}, {"routed experts", r.forward - r.forward_all_to_all}};
    m.backward_kinds += TimeByKind{{"ep all-to-all", r.backward_all_to_all}, {"routed experts", r.backward - r.backward_all_to_all}};
    m.tp_forward_exposed += r.forward_tp;
    m.tp_backward_exposed += r.backward_tp;
    m.ep_forward_exposed = r.forward_all_to_all;
    m.ep_backward_exposed = r.backward_all_to_all;
    m.collectives = r.collectives;
    const ExpertLoad load = expert_load(t);
    switch (t.checkpoint) {
      case Checkpointing::none: break;
      case Checkpointing::selective_op: {
        // The attention and shared experts under the policy; the routed experts' pass again
        // but for its all-to-alls, whose outputs the policy keeps, and the TP collectives it
        // adds (its gather is counted with the attention's, its reduce-scatter kept).
        const Tick routed = r.forward - r.forward_all_to_all - r.forward_tp;
        m.recompute = op_checkpoint_recompute(t, hw, s.dtype, true, fused_gather(s, variant)) + std::max<Tick>(0, routed);
        break;
      }
      case Checkpointing::full: m.recompute = m.forward, m.recompute_tp_bytes = m.forward_tp_bytes; break;
      case Checkpointing::selective:
        m.recompute = t.attention.impl == AttentionImpl::unfused
                          ? attention_core()
                          : selective(load.rank_slots(load.busiest_rank), t.model.moe.expert_ffn_hidden / tp) +
                                (shared > 0 ? selective(static_cast<double>(tokens), shared / tp) : 0);
        break;
    }
    m.recompute_kinds = t.checkpoint == Checkpointing::full ? m.forward_kinds : TimeByKind{{"recompute", m.recompute}};
  }
  // Embedding: a row gather forward, a scatter-add of the gradient backward (this rank's sequence shard).
  c.embedding_forward = elementwise_time(hw, {ElementwiseOp{rows * h * e, rows * h * e}});
  c.embedding_backward = elementwise_time(hw, {ElementwiseOp{2.0 * rows * h * e, rows * h * e}});
  const OutputLayerCosts out = simulate_output_layer(t, hw, s.dtype);
  c.output_forward = out.forward;
  c.output_backward = out.backward;
  c.output_forward_tp_bytes = out.forward_tp_bytes;
  c.output_backward_tp_bytes = out.backward_tp_bytes;
  // Only a schedule that runs them apart needs them; never more than the backward they are
  // part of (the layer's overlaps its GEMMs with TP).
  if (t.splits_backward()) {
    c.backward_weight = std::min(layer_weight_gradients(t, hw, s.dtype), c.backward);
    if (c.moe) c.moe->backward_weight = std::min(layer_weight_gradients(t, hw, s.dtype, true), c.moe->backward);
    c.output_backward_weight = out.backward_weight;
  }
  return c;
}

}  // namespace tpsim
