#include "tpsim/step/layer_costs.hpp"

#include <tuple>

#include "tpsim/analysis/metrics.hpp"
#include "tpsim/runtime/executor.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/strategies/registry.hpp"

namespace tpsim {

namespace {

Tick makespan(const Dag& dag, const HardwareSpec& hw) {
  const Timeline tl = execute(dag, hw, false);
  return analyze(dag, tl).makespan;
}

Scenario layer_scenario(const Scenario& s, Pass pass, int layers) {
  const TrainingStepSpec& t = s.workload.step;
  Scenario sub;
  sub.name = s.name;
  sub.hardware = s.hardware;
  sub.gpus = t.mesh.size(MeshDim::tp);
  sub.dtype = s.dtype;
  sub.software = s.software;
  sub.workload.op = "transformer_layer";
  sub.workload.model = t.model;
  sub.workload.tokens = t.microbatch_tokens();
  sub.workload.seq_len = t.seq_len;
  sub.workload.pass = pass;
  sub.workload.layers = layers;
  sub.workload.linear_dtype = t.linear_dtype;
  sub.workload.compile = t.compile;
  return sub;
}

// Per layer in steady state: the second layer's increment, so the first launch's ramp
// is not charged to every layer. Also the TP communication a layer leaves exposed.
std::pair<Tick, Tick> per_layer(const Scenario& s, const std::string& variant, Pass pass) {
  const Dag one_dag = build_dag(layer_scenario(s, pass, 1), variant);
  const VariantMetrics one = analyze(one_dag, execute(one_dag, s.hardware, false));
  const Tick two = makespan(build_dag(layer_scenario(s, pass, 2), variant), s.hardware);
  return {two > one.makespan ? two - one.makespan : one.makespan, one.exposed_comm};
}

Tick elementwise_time(const HardwareSpec& hw, const std::vector<ElementwiseOp>& ops) {
  Dag dag(1);
  for (std::size_t i = 0; i < ops.size(); ++i) dag.add(0, 0, "elementwise", ops[i]);
  return ops.empty() ? 0 : makespan(dag, hw);
}

}  // namespace

Tick optimizer_time(const HardwareSpec& hw, double params) {
  if (params <= 0) return 0;
  return elementwise_time(hw, {ElementwiseOp{16.0 * params, 12.0 * params}});
}

LayerCosts simulate_layer_costs(const Scenario& s, const std::string& variant) {
  const TrainingStepSpec& t = s.workload.step;
  const HardwareSpec& hw = s.hardware;
  const int tp = t.mesh.size(MeshDim::tp);
  const double e = dtype_bytes(s.dtype);
  const std::int64_t tokens = t.microbatch_tokens(), rows = tokens / tp;
  const std::int64_t h = t.model.hidden, f = t.model.ffn_hidden / tp;
  LayerCosts c;
  std::tie(c.forward, c.forward_exposed_comm) = per_layer(s, variant, Pass::forward);
  std::tie(c.backward, c.backward_exposed_comm) = per_layer(s, variant, Pass::backward);
  switch (t.checkpoint) {
    case Checkpointing::none: break;
    case Checkpointing::full: c.recompute = c.forward; break;
    case Checkpointing::selective:
      // Norm outputs and the FFN activation are recomputed (GEMM outputs kept): the
      // same kernels as the layer's forward (strategies/layer.cpp).
      c.recompute = elementwise_time(hw, {ElementwiseOp{rows * h * e, rows * h * e}, ElementwiseOp{rows * h * e, rows * h * e},
                                          ElementwiseOp{t.model.ffn_up_projections() * tokens * f * e, 1.0 * tokens * f * e}});
      break;
  }
  // Embedding: a row gather forward, a scatter-add of the gradient backward (this rank's sequence shard).
  c.embedding_forward = elementwise_time(hw, {ElementwiseOp{rows * h * e, rows * h * e}});
  c.embedding_backward = elementwise_time(hw, {ElementwiseOp{2.0 * rows * h * e, rows * h * e}});
  // Output layer: the vocabulary is split over TP (column-parallel); its input is all-gathered
  // from the sequence shards and its input gradient reduce-scattered back.
  const std::int64_t v = (t.model.vocab + tp - 1) / tp;
  const GroupLayout tp_group{tp, tp, 1, 1};
  const Tick gather = group_collective_cost(GroupOp::all_gather, tokens * h * e, tp_group, hw).time;
  const Tick scatter = group_collective_cost(GroupOp::reduce_scatter, tokens * h * e, tp_group, hw).time;
  Dag fwd(1), bwd(1);
  fwd.add(0, 0, "final_norm", ElementwiseOp{rows * h * e, rows * h * e});
  fwd.add(0, 0, "output", GemmOp{{tokens, v, h, s.dtype}});
  fwd.add(0, 0, "cross_entropy", ElementwiseOp{tokens * v * e, 4.0 * tokens});  // logits read once, fp32 loss per token
  bwd.add(0, 0, "cross_entropy.backward", ElementwiseOp{tokens * v * e, tokens * v * e});
  bwd.add(0, 0, "output.backward_input", GemmOp{{tokens, h, v, s.dtype}});
  bwd.add(0, 0, "output.backward_weight", GemmOp{{h, v, tokens, s.dtype}});
  bwd.add(0, 0, "final_norm.backward", ElementwiseOp{3.0 * rows * h * e, rows * h * e});
  c.output_forward = makespan(fwd, hw) + gather;
  c.output_backward = makespan(bwd, hw) + scatter;
  return c;
}

}  // namespace tpsim
