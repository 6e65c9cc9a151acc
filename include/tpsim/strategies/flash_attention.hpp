#pragma once
// Fused attention as one rank runs it: the flash kernel, and around FlashAttention-2's
// backward the two memory-bound kernels PyTorch launches with it (run_flash_bwd_seqk_parallel
// in aten/src/ATen/native/transformers/cuda/flash_attn/flash_bwd_launch_template.h):
// flash_bwd_dot_do_o_kernel before (D = rowsum(dO * O) per row, and the fp32 dQ accumulator
// cleared), flash_bwd_convert_dq_kernel after (that accumulator converted to dQ).
#include <string>
#include <utility>
#include <vector>

#include "tpsim/dag/op.hpp"

namespace tpsim {

// The kernels in launch order, named `name` for the flash kernel and `name` + ".dot_do_o",
// ".convert_dq" for the others.
std::vector<std::pair<std::string, OpPayload>> flash_attention_kernels(const AttentionOp& a, const std::string& name);

}  // namespace tpsim
