#include "tpsim/step/output_layer.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tpsim/step/group_layout.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

namespace {

// One GPU's kernels of a pass, back to back (kernels_alone prices them).
using Kernels = std::vector<std::pair<std::string, OpPayload>>;

struct LossShape {
  double tokens = 0;  // rows of logits one pass takes (a chunk's, or the microbatch's)
  double vocab = 0;   // logits per token on this rank
  double e = 0;       // bytes per logit element
};

// The loss forward on `x.tokens` rows; returns the TP collectives it waits for.
Tick add_loss_forward(Kernels& d, const TrainingStepSpec& t, const HardwareSpec& hw, const LossShape& x, const GroupLayout& tp_group) {
  const double logits = x.tokens * x.vocab, e = x.e, per_token = 4.0 * x.tokens;
  Tick collectives = 0;
  if (!t.loss_on_vocab_shard()) collectives += group_collective_cost(GroupOp::all_gather, logits * e, tp_group, hw).time;
  if (t.loss_parallel_decomposed()) {
    // loss_parallel (torch/distributed/tensor/parallel/loss.py, read at pytorch 02eef6b):
    // _log_softmax as aten ops (amax, x - max, exp, sum, shifted - logsumexp) with an
    // all-reduce of the maxima and one of the sums, nll_loss's picked values all-reduced.
    d.push_back({"cross_entropy.float", aten_convert(logits, e, 4)});
    d.push_back({"loss_parallel.amax", ElementwiseOp{logits * 4, per_token}});
    d.push_back({"loss_parallel.sub_max", ElementwiseOp{logits * 4, logits * 4}});
    d.push_back({"loss_parallel.exp", ElementwiseOp{logits * 4, logits * 4}});
    d.push_back({"loss_parallel.sum", ElementwiseOp{logits * 4, per_token}});
    d.push_back({"loss_parallel.sub_logsumexp", ElementwiseOp{logits * 4, logits * 4}});
    d.push_back({"loss_parallel.nll_loss", ElementwiseOp{8.0 * x.tokens, per_token}});
    collectives += 3 * group_collective_cost(GroupOp::all_reduce, per_token, tp_group, hw).time;
  } else if (t.cross_entropy == CrossEntropy::compiled) {
    // Inductor fuses the cast, log_softmax and nll_loss into one reduction per token: with
    // online softmax (torch/_inductor/config.py online_softmax, on by default) the maximum and
    // the sum of exponentials come from one read of the logits; a value per token is kept.
    d.push_back({"cross_entropy.compiled", ElementwiseOp{logits * e, 2 * per_token}});
  } else if (t.cross_entropy == CrossEntropy::aten) {
    // logits.float(); log_softmax: a row of a vocabulary's logits is too long to stay in shared
    // memory, so ATen's cunn_SoftMaxForward reads it three times (its maximum, the sum of
    // exponentials, then the output: aten/src/ATen/native/cuda/SoftMax.cu); nll_loss picks a
    // value per token.
    d.push_back({"cross_entropy.float", aten_convert(logits, e, 4)});
    d.push_back({"cross_entropy.log_softmax", ElementwiseOp{logits * 12, logits * 4}});
    d.push_back({"cross_entropy.nll_loss", ElementwiseOp{8.0 * x.tokens, per_token}});
  } else {
    d.push_back({"cross_entropy", ElementwiseOp{logits * e, per_token}});  // logits read once, fp32 loss per token
  }
  return collectives;
}

void add_loss_backward(Kernels& d, const TrainingStepSpec& t, const LossShape& x) {
  const double logits = x.tokens * x.vocab, e = x.e;
  if (t.loss_parallel_decomposed()) {
    // _nll_loss_and_log_softmax_backward: zeros with -1 at the targets, then
    // (grad_input + exp(x)) * grad_output, a tensor per op.
    d.push_back({"loss_parallel.backward.zeros", ElementwiseOp{0, logits * 4}});
    d.push_back({"loss_parallel.backward.exp", ElementwiseOp{logits * 4, logits * 4}});
    d.push_back({"loss_parallel.backward.add", ElementwiseOp{logits * 8, logits * 4}});
    d.push_back({"loss_parallel.backward.mul", ElementwiseOp{logits * 4, logits * 4}});
    d.push_back({"cross_entropy.float.backward", aten_convert(logits, 4, e)});
  } else if (t.cross_entropy == CrossEntropy::compiled) {
    // One pass: (softmax - one_hot) x grad from the logits and the kept per-token values,
    // written in the logits' dtype.
    d.push_back({"cross_entropy.compiled.backward", ElementwiseOp{logits * e + 2 * 4.0 * x.tokens, logits * e}});
  } else if (t.cross_entropy == CrossEntropy::aten) {
    // nll_loss's dense gradient, log_softmax's (cunn_SoftMaxBackward: the gradient's row sum,
    // then the gradient and the output read again), the down-cast.
    d.push_back({"cross_entropy.nll_loss.backward", ElementwiseOp{8.0 * x.tokens, logits * 4}});
    d.push_back({"cross_entropy.log_softmax.backward", ElementwiseOp{logits * 12, logits * 4}});
    d.push_back({"cross_entropy.float.backward", aten_convert(logits, 4, e)});
  } else {
    d.push_back({"cross_entropy.backward", ElementwiseOp{logits * e, logits * e}});
  }
}

}  // namespace

OutputLayerCosts simulate_output_layer(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype) {
  const int tp = t.mesh.size(MeshDim::tp);
  const double e = dtype_bytes(dtype);
  const std::int64_t tokens = t.rank_tokens(), rows = tokens / tp, h = t.model.hidden;
  // The vocabulary is split over TP (column-parallel); the input is all-gathered from the
  // sequence shards and its gradient reduce-scattered back.
  const std::int64_t v = (t.model.vocab + tp - 1) / tp;
  const GroupLayout tp_group{tp, tp, 1, 1};
  const Tick gather = group_collective_cost(GroupOp::all_gather, tokens * h * e, tp_group, hw).time;
  const Tick scatter = group_collective_cost(GroupOp::reduce_scatter, tokens * h * e, tp_group, hw).time;
  const int chunks = t.loss_chunks;
  const std::int64_t chunk = tokens / chunks;
  const LossShape x{static_cast<double>(chunk), static_cast<double>(t.loss_vocab()), e};
  OutputLayerCosts c;
  Kernels fwd, bwd;
  // The final norm: eager op by op as the layers' (torchtitan's RMSNorm), or one pass.
  const auto final_norm = [&](Kernels& to, bool backward) {
    const std::string name = backward ? "final_norm.backward" : "final_norm";
    if (!t.aten_norm()) {
      to.push_back({name, ElementwiseOp{(backward ? 3.0 : 1.0) * rows * h * e, rows * h * e}});
      return;
    }
    for (const auto& [k, op] : aten_rmsnorm_kernels(rows * static_cast<double>(h), rows, e, backward)) to.push_back({name + "." + k, op});
  };
  final_norm(fwd, false);
  // Batch-first activations: PyTorch's functional collectives copy the gathered input into
  // place, and its gradient into rank order before the reduce-scatter (strategies/layer.cpp).
  const bool copies_into_place = t.batch_first && tp > 1;
  const double gathered = static_cast<double>(tokens * h) * e;
  if (copies_into_place) fwd.push_back({"output.input.cat", ElementwiseOp{gathered, gathered}});
  Tick loss_collectives = 0;
  if (chunks == 1) {
    fwd.push_back({"output", GemmOp{{tokens, v, h, dtype}}});
    loss_collectives = add_loss_forward(fwd, t, hw, x, tp_group);
    add_loss_backward(bwd, t, x);
    bwd.push_back({"output.backward_input", GemmOp{{tokens, h, v, dtype}}});
    bwd.push_back({"output.backward_weight", GemmOp{{h, v, tokens, dtype}}});
    // Only a schedule that runs it apart needs it alone.
    if (t.splits_backward()) c.backward_weight = kernels_alone({{"output.backward_weight", GemmOp{{h, v, tokens, dtype}}}}, hw);
  } else {
    // torchtitan's ChunkedLossWrapper (components/loss.py, b5bcd76): per chunk of the
    // gathered (TP-replicated) hidden states, lm_head, the loss, and at once that chunk's
    // backward; GradAccumulator copies each chunk's input gradient into one fp32 [tokens, h]
    // buffer, cast back to the activation dtype after the loop. lm_head stays gathered.
    const double hd = static_cast<double>(h), vd = static_cast<double>(v), cd = static_cast<double>(chunk);
    const double td = static_cast<double>(tokens);
    // Its weight gradient accumulates over the chunks: FSDP2 with gradient sync off holds it
    // up-cast to the reduce dtype (_fsdp_param.py to_accumulated_grad_if_needed, then
    // accumulate_unsharded_grad_if_needed); otherwise autograd adds into .grad.
    const bool fsdp_upcast = t.shard_ranks() > 1 && dtype_bytes(t.grad_reduce_dtype) != e;
    const double a = fsdp_upcast ? dtype_bytes(t.grad_reduce_dtype) : e;
    fwd.push_back({"chunked_loss.grad_buffer.zeros", ElementwiseOp{0, td * hd * 4}});
    for (int i = 0; i < chunks; ++i) {
      fwd.push_back({"output", GemmOp{{chunk, v, h, dtype}}});
      loss_collectives += add_loss_forward(fwd, t, hw, x, tp_group);
      add_loss_backward(fwd, t, x);
      fwd.push_back({"output.backward_input", GemmOp{{chunk, h, v, dtype}}});
      fwd.push_back({"output.backward_weight", GemmOp{{h, v, chunk, dtype}}});
      if (i == 0 && fsdp_upcast) fwd.push_back({"output.weight_grad.to_reduce_dtype", aten_convert(vd * hd, e, a)});
      if (i > 0) fwd.push_back({"output.weight_grad.accumulate", ElementwiseOp{vd * hd * (e + a), vd * hd * a}});
      fwd.push_back({"chunked_loss.grad.float", aten_convert(cd * hd, e, 4)});
      fwd.push_back({"chunked_loss.grad_buffer.copy", ElementwiseOp{cd * hd * 4, cd * hd * 4}});
    }
    fwd.push_back({"chunked_loss.grad.to_dtype", aten_convert(td * hd, 4, e)});
  }
  if (copies_into_place) bwd.push_back({"output.input_grad.chunk_cat", ElementwiseOp{gathered, gathered}});
  final_norm(bwd, true);
  c.forward = kernels_alone(fwd, hw) + gather + loss_collectives;
  c.backward = kernels_alone(bwd, hw) + scatter;
  c.backward_weight = std::min(c.backward_weight, c.backward);
  // Each ring member sends (tp - 1) / tp of the buffer to its successor, which is in the next
  // node for one member per node the group spans.
  const GroupLayout tp_spread = group_layout(t.mesh, MeshDim::tp, hw.fabric.gpus_per_node, 0);
  const double ring_bytes = static_cast<double>(tokens * h) * e * (tp - 1) / tp;
  const double across = tp_spread.crosses_nodes() ? static_cast<double>(tp_spread.nodes) / tp : 0.0;
  c.forward_tp_bytes = c.backward_tp_bytes = PerTier{ring_bytes * (1 - across), ring_bytes * across};
  return c;
}

}  // namespace tpsim
