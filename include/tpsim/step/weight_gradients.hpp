#pragma once
// A decoder layer's backward split the way a zero-bubble pipeline schedule runs it
// (torch/distributed/pipelining/_backward.py, read at pytorch 060ca5d): stage_backward_input
// computes the input gradients, what the previous stage waits for, with retain_graph and a hook
// that keeps the gradient reaching every "intermediate" node where a weight joins (a linear's
// output gradient dY); stage_backward_weight later runs autograd.grad from those nodes to the
// weights: dW = X^T dY of every linear, X being the saved activation the retained graph holds.
// Under activation checkpointing that second autograd.grad is a new graph task, and
// non-reentrant checkpoint recomputes its region once per graph task (torch/utils/checkpoint.py,
// _checkpoint_hook.unpack_hook keys the recomputation on the task id): the forward is recomputed
// again for the weight half.
#include "tpsim/core/tick.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

// One layer's weight-gradient GEMMs on one TP rank, back to back: [in, out] = [in, tokens] x
// [tokens, out] per linear (strategies/layer.cpp runs the same GEMMs inside its backward), in
// fp8 under fp8 linears as torchao's Float8Linear runs its grad_weight. A MoE layer (`moe`)
// adds its router's and the busiest rank's routed experts' (expert_parallel.hpp), and its
// FFN linears are the shared experts'.
Tick layer_weight_gradients(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool moe = false);

// What one layer's input-gradient pass keeps on one rank until its weight-gradient pass,
// beyond the activations the forward saved: every linear's output gradient (a row-parallel
// one's whole [tokens, hidden], gathered; a MoE layer's router scores and its experts' output
// gradients per token slot on the busiest rank). Bytes.
double weight_gradient_inputs_bytes(const TrainingStepSpec& t, double element_bytes, bool moe = false);

}  // namespace tpsim
