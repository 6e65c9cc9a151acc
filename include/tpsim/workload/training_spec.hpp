#pragma once
// What a training_step workload asks for: a model, a batch, and how it is laid
// out on a device mesh (README, "Training steps").
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/hw/dtype.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/workload/model_shape.hpp"

namespace tpsim {

enum class MeshDim { tp, cp, ep, fsdp, dp, pp };
constexpr int kMeshDims = 6;
constexpr std::array<MeshDim, kMeshDims> kAllMeshDims = {MeshDim::tp, MeshDim::cp, MeshDim::ep, MeshDim::fsdp, MeshDim::dp, MeshDim::pp};
std::string_view mesh_dim_name(MeshDim d);
std::optional<MeshDim> parse_mesh_dim(std::string_view name);

struct MeshShape {
  std::array<int, kMeshDims> sizes{1, 1, 1, 1, 1, 1};
  std::vector<MeshDim> order = {MeshDim::tp, MeshDim::cp, MeshDim::ep, MeshDim::fsdp, MeshDim::dp, MeshDim::pp};  // inner to outer
  int size(MeshDim d) const { return sizes[static_cast<int>(d)]; }
  std::int64_t gpus() const;  // the product of the sizes; int64 max where that overflows
  // Rank distance between neighbours of a `d` group: the product of the dims inside it.
  std::int64_t stride(MeshDim d) const;
};

// selective: Megatron-LM's (norms and activation, or the unfused attention core,
// recomputed); selective_op: torchtitan's per-op policy (step/op_checkpoint.hpp).
enum class Checkpointing { none, selective, selective_op, full };
// interleaved_zero_bubble: PyTorch's ScheduleInterleavedZeroBubble (ZB1P), which splits each
// backward into its input-gradient and weight-gradient halves; zbv_zero_bubble: its
// ScheduleZBVZeroBubble, two chunks per rank in a V; dualpipev: its ScheduleDualPipeV, the
// same V with DeepSeek's DualPipe order (pipeline_order.hpp).
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved_1f1b, interleaved_zero_bubble, zbv_zero_bubble, dualpipev };
// How context parallelism brings the other ranks' K/V to a rank's queries (PyTorch's
// context_parallel rotate methods): one all-gather before the block loop (the default,
// as in torchtitan and the Llama 3 paper), or a ring of neighbour exchanges.
enum class CpMethod { allgather, ring };
// The loss kernels (TrainingStepSpec::cross_entropy).
enum class CrossEntropy { in_place, aten, compiled };
// PyTorch's AdamW implementation (TrainingStepSpec::optimizer): one fused kernel, or the
// foreach ops of torch/optim/adam.py _multi_tensor_adam.
enum class OptimizerImpl { fused, foreach };
// How attention runs: one fused flash-attention kernel, or unfused as Megatron-LM's
// DotProductAttention (megatron/core/transformer/dot_product_attention.py) and the
// Megatron-LM of Korthikanti et al. 2022: a batched QK^T GEMM, a fused scale-mask-softmax
// over the materialized [s, s] scores, dropout on them, and a batched GEMM with V.
// `flash2`: FlashAttention-2, the kernel of PyTorch's SDPA flash backend
// (aten/src/ATen/native/transformers/cuda/flash_attn), where `flash` is the hardware's
// newest (FlashAttention-3 on Hopper); `cudnn`: cuDNN's fused attention, SDPA's cuDNN backend.
enum class AttentionImpl { flash, flash2, cudnn, unfused };
std::string_view attention_impl_name(AttentionImpl a);
// The fused kernel a (not unfused) implementation runs.
AttentionKernel attention_kernel_of(AttentionImpl a);
struct AttentionChoice {
  AttentionImpl impl = AttentionImpl::flash;
  double dropout = 0;  // attention-probability dropout (unfused only)
};
std::string_view checkpointing_name(Checkpointing c);
std::string_view pipeline_schedule_name(PipelineSchedule p);
std::string_view cp_method_name(CpMethod m);
// FSDP2's float8 all-gather of the fp8 linears' weights (torchao float8/fsdp_utils.py,
// torchtitan's enable_fsdp_float8_all_gather): each shard is cast to fp8 before the
// all-gather, with its scale from an amax all-reduce per weight at that moment
// (dynamic), or from one all-reduce of every weight's amax after the optimizer step
// (precompute_float8_dynamic_scale_for_fsdp).
enum class Fp8AllGather { off, dynamic_scale, precomputed_scale };
// torchao's float8 training recipes for linears (torchao/float8/config.py,
// Float8LinearRecipeName): `tensorwise`, one scale per tensor and cuBLAS's fp8 GEMM; `rowwise`,
// a scale per row of every GEMM operand along its contraction (axiswise casts: each operand
// cast anew for each GEMM that reads it), torch._scaled_mm with rowwise scales.
enum class Fp8Scaling { tensorwise, rowwise };
struct Fp8Recipe {
  Fp8Scaling scaling = Fp8Scaling::tensorwise;
  // Rowwise GEMMs on ATen's own CUTLASS kernel (PyTorch built with cuBLAS before 12.9, as
  // torchao documents the recipe; every Blackwell build), else cuBLAS's (12.9 and later on Hopper).
  bool aten_rowwise_kernel = true;
  bool rowwise() const { return scaling == Fp8Scaling::rowwise; }
  // Whether GEMMs of this dtype run ATen's rowwise kernel (fp8 linears under rowwise scaling).
  bool aten_gemm(Dtype linear) const { return linear == Dtype::fp8 && rowwise() && aten_rowwise_kernel; }
  // Rowwise GEMMs without fast accumulation (the gradients') run on cuBLAS's tensor-wise kernel
  // with unit scales, and each output is then multiplied by the outer product of the two
  // operands' inverse scales ("The rowwise CUTLASS-based kernel is so slow without fast-accum
  // that we'd rather use the tensorwise cuBLAS-based kernel and do the scaling manually
  // afterwards": torchao/float8/float8_ops.py, addmm_float8_unwrapped, since torchao 6a177c9 of
  // December 2024): a pass over every such output (rowwise_output_rescale).
  bool rescales_output(Dtype linear, bool forward) const { return linear == Dtype::fp8 && rowwise() && !forward; }
  // How torch._scaled_mm runs torchao's Float8Linear GEMMs on linears of this dtype: their scales,
  // their kernel, and fast accumulation in the forward GEMM alone (Float8LinearConfig:
  // gemm_config_output use_fast_accum=True; grad_input's and grad_weight's off).
  GemmProblem::ScaledMm scaled_mm(Dtype linear, bool forward) const {
    if (rescales_output(linear, forward)) return {};  // tensor-wise, unit scales, slow accumulation
    return {.rowwise_scales = linear == Dtype::fp8 && rowwise(), .aten_rowwise = aten_gemm(linear),
            .fast_accumulation = linear == Dtype::fp8 && forward};
  }
};

struct TrainingStepSpec {
  ModelShape model;
  std::int64_t seq_len = 0;
  std::int64_t local_batch = 0;  // sequences per data-parallel (dp x fsdp x ep) rank and step
  MeshShape mesh;
  Checkpointing checkpoint = Checkpointing::none;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int microbatches = 1;     // pipeline microbatches the local batch is cut into (1 without a pipeline)
  int virtual_stages = 1;   // model chunks per pipeline rank (interleaved 1F1B)
  // The embedding and the output layer (final norm, projection, loss) each count as this many
  // decoder layers when the layers are split over the pipeline's chunks: torchtitan's
  // pipeline_parallel_first/last_stage_less_layers (its default 1, 1; Llama 3's balance), or
  // 0 as Megatron-LM by default (account_for_embedding/loss_in_pipeline_split off).
  int pp_embedding_weight = 0, pp_output_weight = 0;
  // Pipeline sends and receives: asynchronous (PyTorch's pipelining: the next pass does not
  // wait for a send), or blocking as Megatron-LM's default (overlap_p2p_comm off: each
  // send's request is waited on before the stage's next pass).
  bool pp_p2p_blocking = false;
  // Whose pipeline runtime holds the activations between stages: PyTorch's pipelining keeps a
  // receive buffer per stage and microbatch for good and each forward's output until its
  // backward (torch/distributed/pipelining/stage.py); Megatron-LM receives into fresh tensors
  // and frees a sent output (deallocate_pipeline_outputs), blocking or not (overlap_p2p_comm).
  bool pp_torch_buffers = true;
  Dtype grad_reduce_dtype = Dtype::fp32;  // FSDP2 / DDP gradient reduction (torchtitan's default: fp32)
  std::optional<Dtype> linear_dtype;      // fp8 linears (their GEMMs and scaling casts); else the scenario's dtype
  Fp8AllGather fsdp_fp8_all_gather = Fp8AllGather::off;  // with fp8 linears only
  Fp8Recipe fp8;                                         // with fp8 linears only
  // With fp8 linears, TP's all-gathers (inputs forward, output gradients backward) in fp8:
  // torchtitan's default for tensorwise float8 with TP (torchao's Float8ColwiseParallel).
  bool tp_fp8_all_gather = false;
  bool compile = false;                   // torch.compile: element-wise chains fused
  // Uncompiled, the element-wise parts run as eager PyTorch runs torchtitan's model code
  // (strategies/eager_kernels.hpp: aten op by op, norms and RoPE in fp32), not as fused
  // kernels (Megatron-LM's, Transformer Engine's): `"elementwise": "aten"`.
  bool aten_elementwise = false;
  // With it, the RMSNorms as PyTorch 2.9's nn.RMSNorm runs them (`"norm": "fused"`: one
  // _fused_rms_norm kernel each way) rather than op by op (`"aten"`: torchtitan's own RMSNorm,
  // or nn.RMSNorm's composite up to PyTorch 2.8).
  bool fused_norm = false;
  bool aten_norm() const { return aten_elementwise && !fused_norm; }
  // torchtitan's model code runs the element-wise parts, eager (aten) or compiled.
  bool torchtitan_model_code() const { return compile || aten_elementwise; }
  // The loss: Megatron-LM-style, the fp32 softmax and its gradient computed in one fp32 copy of
  // the logits (`"cross_entropy": "in_place"`), or F.cross_entropy on logits.float() as
  // torchtitan's train.py loss_fn (`"aten"`): the fp32 copy, log_softmax's output, and in
  // backward nll_loss's dense gradient and log_softmax's, each a tensor of its own; or that
  // loss under torch.compile (`"compiled"`, torchtitan's compile components "loss"): Inductor's
  // one online-softmax reduction forward and one pass writing the logits' gradient backward.
  CrossEntropy cross_entropy = CrossEntropy::in_place;
  // AdamW's kernels (`"optimizer"`): `fused` (torchtitan's default from 2025, its
  // `optimizer.implementation`; Megatron-LM's fused Adam alike) or `foreach` (torchtitan
  // before that: `--optimizer.fused` off by default, `foreach=True`).
  OptimizerImpl optimizer = OptimizerImpl::fused;
  // With `aten` and TP: torchtitan's default loss_parallel (torch.distributed.tensor.parallel
  // loss.py): the loss on this rank's vocabulary shard, log_softmax decomposed op by op with two
  // small all-reduces, backward in one fused formula of its own; else the logits are gathered.
  bool loss_parallel = true;
  // torchtitan's ChunkedLossWrapper (components/loss.py, b5bcd76; its Llama 3 and DeepSeek-V3
  // configs use 8): the output projection, the loss and their backward run this many tokens'
  // chunks one after another inside the loss call, so one chunk's logits live at a time.
  // 1: the whole microbatch's logits at once.
  int loss_chunks = 1;
  bool sequence_parallel = true;          // TP with sequence parallelism (else all-reduces, replicated norms)
  bool tp_saves_gathered_input = false;   // tp_weight_grad_input "saved" (PyTorch) or "regather" (Megatron-LM)
  bool batch_first = false;               // activation_layout "batch_first" (torchtitan) or "sequence_first" (Megatron-LM)
  AttentionChoice attention;
  bool pipeline_settings_ignored = false; // microbatches or a schedule given without a pipeline
  CpMethod cp_method = CpMethod::allgather;
  // Routing imbalance: the busiest expert gets (1 + skew) times the mean tokens (0: uniform).
  double expert_load_skew = 0;
  // Or the share of token slots each expert gets (normalized; empty: from the skew).
  std::vector<double> expert_load;
  // Each MoE layer's token slots sent in this many chunks, so the experts of one chunk run
  // while the next chunk's tokens travel (1: one all-to-all each way, nothing overlapped).
  int moe_dispatch_chunks = 1;
  // How the all-to-alls run (step/all_to_all.hpp): NCCL's grouped send/recv, every token slot
  // on its own (torchtitan, Megatron-LM), or DeepEP's node forwarding (`"deepep"`: once per
  // token and node over the network, NVLink inside the node).
  bool moe_node_forwarding = false;
  // Node-limited routing (DeepSeek-V3 report, section 2.1.2): each token goes to at most this
  // many nodes of its ep group (0: no limit). With node forwarding only: it changes nothing
  // NCCL sends.
  int moe_node_limit = 0;
  // DeepSeek-V3's low-precision communication (report, section 3.3.3): the dispatch, and
  // backward the output gradients sent to the experts, in fp8 with one fp32 scale per 128
  // channels, cast before they leave (the experts' fp8 GEMMs take them as they come); the
  // combines stay in the activation dtype. With fp8 linears only.
  bool moe_fp8_dispatch = false;
  // The experts' GEMMs as one torch._grouped_mm each (torchtitan's MoE: PyTorch's grouped
  // kernel, GemmSpec::grouped) rather than a batched cuBLAS GEMM (`"expert_gemm"`).
  bool grouped_expert_gemm = false;
  bool cp_method_ignored = false;         // cp_method given without context parallelism

  std::int64_t microbatch_sequences() const { return local_batch / microbatches; }
  std::int64_t microbatch_tokens() const { return microbatch_sequences() * seq_len; }
  // Tokens of one microbatch on one context-parallel rank (its TP group shards them further).
  std::int64_t rank_tokens() const { return microbatch_tokens() / mesh.size(MeshDim::cp); }
  // Ranks a parameter is sharded and its gradient reduced over: FSDP2 runs on fsdp x cp
  // (torchtitan's dp_shard_cp mesh), since CP ranks hold the same weights; every weight but
  // the routed experts' is also the same on the ep ranks.
  int shard_ranks() const { return expert_shard_ranks() * mesh.size(MeshDim::ep); }
  // Ranks holding the same routed experts (torchtitan: dp_shard_mod_ep x cp).
  int expert_shard_ranks() const { return mesh.size(MeshDim::fsdp) * mesh.size(MeshDim::cp); }
  // Ranks that see different sequences: dp, fsdp, and ep (expert-parallel ranks run their
  // own tokens through attention and exchange them only inside MoE layers).
  std::int64_t data_parallel() const {
    return static_cast<std::int64_t>(mesh.size(MeshDim::dp)) * mesh.size(MeshDim::fsdp) * mesh.size(MeshDim::ep);
  }
  std::int64_t global_tokens() const { return local_batch * seq_len * data_parallel(); }
  int chunks() const { return mesh.size(MeshDim::pp) * virtual_stages; }
  // Whether the schedule runs each backward as an input-gradient pass and a later
  // weight-gradient pass (zero bubble) instead of one pass.
  bool splits_backward() const {
    return schedule == PipelineSchedule::interleaved_zero_bubble || schedule == PipelineSchedule::zbv_zero_bubble ||
           schedule == PipelineSchedule::dualpipev;
  }
  // The loss runs on this rank's vocabulary shard (Megatron-LM's loss, or aten's under
  // loss_parallel); otherwise the output layer gathers every rank's logits first.
  bool loss_on_vocab_shard() const { return !pytorch_loss() || loss_parallel || mesh.size(MeshDim::tp) == 1; }
  // aten's loss as loss_parallel decomposes it on the vocabulary shard (TP only).
  bool loss_parallel_decomposed() const { return cross_entropy == CrossEntropy::aten && loss_parallel && mesh.size(MeshDim::tp) > 1; }
  // PyTorch's F.cross_entropy, eager or compiled (not Megatron-LM's in-place loss).
  bool pytorch_loss() const { return cross_entropy != CrossEntropy::in_place; }
  // Logits per token on one TP rank.
  std::int64_t loss_vocab() const {
    const int tp = mesh.size(MeshDim::tp);
    return loss_on_vocab_shard() ? (model.vocab + tp - 1) / tp : model.vocab;
  }
  // The decoder layers' linear weights reach their GEMMs already in fp8 (gathered so).
  bool weights_gathered_in_fp8() const { return fsdp_fp8_all_gather != Fp8AllGather::off && shard_ranks() > 1; }
};

}  // namespace tpsim
