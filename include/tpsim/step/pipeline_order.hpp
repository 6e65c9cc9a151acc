#pragma once
// The order in which one pipeline rank runs the forward and backward passes of its
// model chunks, as PyTorch's and Megatron-LM's schedules issue them:
//  - gpipe: every forward, then every backward (torch.distributed.pipelining
//    ScheduleGPipe, schedules.py);
//  - 1f1b: pp - rank - 1 warm-up forwards, then one forward one backward, then the
//    remaining backwards (Schedule1F1B; Megatron-LM forward_backward_pipelining_without_interleaving);
//  - interleaved_1f1b: v chunks per rank (chunk c on rank c mod pp), microbatches in
//    groups of pp, (pp - rank - 1) x 2 + (v - 1) x pp warm-up forwards (Megatron-LM
//    forward_backward_pipelining_with_interleaving; PyTorch ScheduleInterleaved1F1B).
// The bubble is not computed from this: it comes from running the orders together.
#include <vector>

#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

struct PipelineWork {
  int chunk = 0;  // global model chunk: 0 .. pp x v - 1, layers in order
  int microbatch = 0;
  bool forward = true;
};

std::vector<PipelineWork> pipeline_order(PipelineSchedule s, int pp, int virtual_stages, int microbatches, int rank);

}  // namespace tpsim
