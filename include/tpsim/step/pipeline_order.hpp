#pragma once
// The order in which one pipeline rank runs the forward and backward passes of its
// model chunks, as PyTorch's and Megatron-LM's schedules issue them:
//  - gpipe: every forward, then every backward (torch.distributed.pipelining
//    ScheduleGPipe, schedules.py);
//  - 1f1b: pp - rank - 1 warm-up forwards, then one forward one backward, then the
//    remaining backwards (Schedule1F1B; Megatron-LM forward_backward_pipelining_without_interleaving);
//  - interleaved_1f1b: v chunks per rank (chunk c on rank c mod pp), microbatches in
//    groups of pp, (pp - rank - 1) x 2 + (v - 1) x pp warm-up forwards (Megatron-LM
//    forward_backward_pipelining_with_interleaving; PyTorch ScheduleInterleaved1F1B);
//  - interleaved_zero_bubble: PyTorch's ScheduleInterleavedZeroBubble, the ZB1P schedule of
//    Qi et al. 2024 (torch/distributed/pipelining/schedules.py at pytorch 1fd7abc2,
//    _get_1f1b_rank_ops with enable_zero_bubble): v chunks per rank as interleaved 1F1B,
//    microbatches in rounds of m / max(1, m / pp), (v - 1) x round + pp - rank - 1 warm-up
//    forwards; each backward is split into its input gradient (I, what the previous stage
//    waits for) and its weight gradient (W); in the steady state and the cool-down each
//    I is followed, after the first `rank` of them, by the W of the oldest I not yet
//    followed, and the remaining W close the step;
//  - zbv_zero_bubble: PyTorch's ScheduleZBVZeroBubble (Qi et al. 2024, section 6; the same file):
//    two chunks per rank in a V, rank r holding chunks r and 2 pp - 1 - r (so the last chunk, with
//    the output layer, is on rank 0, and chunks pp - 1 and pp meet on the last rank without a
//    send); 2 (pp - r) - 1 forwards of the first chunk, r pairs of forwards, pp - r rounds of
//    forward, I and W of the second chunk, then both chunks in turn, F I W each, and a cool-down
//    of I's with W's filling in;
//  - dualpipev: PyTorch's ScheduleDualPipeV (DeepSeek's DualPipe on a V, the same file in
//    PyTorch 2.10): the V of ZBV, 2 (pp - r - 1) forwards of the first chunk, r + 1 pairs,
//    then I W F of the second chunk, then pairs of a forward of one chunk and a whole backward
//    of the other, and a cool-down where the last microbatches split into I and W. PyTorch's
//    runtime runs such a pair (OVERLAP_F_B) as its forward, then its backward, unless a custom
//    function is registered for it (_PipelineScheduleRuntime; torchtitan's trainer registers
//    none), so the pairs run one after the other here: DualPipe's overlap of one microbatch's
//    all-to-alls with the other's compute is not in it.
// The bubble is not computed from this: it comes from running the orders together.
#include <vector>

#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

// A whole backward, or its input-gradient or weight-gradient half (zero-bubble schedules).
enum class PipelinePass { forward, backward, backward_input, backward_weight };

struct PipelineWork {
  int chunk = 0;  // global model chunk: 0 .. pp x v - 1, layers in order
  int microbatch = 0;
  PipelinePass pass = PipelinePass::forward;
  bool forward() const { return pass == PipelinePass::forward; }
};

std::vector<PipelineWork> pipeline_order(PipelineSchedule s, int pp, int virtual_stages, int microbatches, int rank);

// The pipeline rank that runs model chunk `chunk`: chunk mod pp, or the V of zbv_zero_bubble and dualpipev.
int chunk_rank(PipelineSchedule s, int pp, int chunk);

}  // namespace tpsim
