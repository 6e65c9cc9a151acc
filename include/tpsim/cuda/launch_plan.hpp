#pragma once
// Lowering an op DAG to what one host thread per GPU would enqueue on real
// CUDA streams: per rank, in program order, each call with its stream and
// arguments; cross-stream dependencies as cudaEventRecord / cudaStreamWaitEvent
// on per-rank event slots; collectives, send/recv and barriers by group with
// every member's matching call, each in the communicator of its process group
// (the world's, or one split from it: ncclCommSplit). Pure host code: planned and
// tested without a GPU.
#include <cstdint>
#include <string>
#include <vector>

#include "tpsim/dag/dag.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

enum class LaunchKind {
  gemm,            // cublasLtMatmul
  elementwise,     // a memory-bound kernel of tpsim's own
  reduction,       // sum of stacked partials, fp32 accumulation (tpsim's own kernel)
  attention,       // flash-attention-shaped kernel
  fused_gemm,      // persistent ring GEMM (not run by the CUDA backend yet)
  memcpy_peer,     // cudaMemcpyPeerAsync (copy engine)
  nccl_collective, // ncclAllGather / ncclReduceScatter
  nccl_sendrecv,   // ncclGroupStart; ncclSend...; ncclRecv...; ncclGroupEnd
  barrier,         // signal + wait on peer-mapped flags
  event_record,    // cudaEventRecord
  event_wait,      // cudaStreamWaitEvent
};

std::string_view launch_kind_name(LaunchKind k);

struct Launch {
  OpId op = 0;
  LaunchKind kind = LaunchKind::gemm;
  int stream = 0;
  int event_slot = -1;  // record / wait: the rank's event index
  int group = -1;       // collectives, send/recv, barriers: the rendezvous its members share
  int process_group = -1;  // ... and the process group (communicator) it runs in
  std::string args;     // shape, bytes, peers: what the call needs, readable
  std::vector<Transfer> recvs;  // send/recv: what the peers of the group send this rank (ncclRecv calls)
};

struct RankPlan {
  int rank = 0;
  int streams = 0;
  int events = 0;  // cudaEvent_t to create
  std::vector<Launch> launches;  // host program order
};

struct LaunchPlan {
  std::vector<RankPlan> ranks;
  int groups = 0;
  // The DAG's process groups by id (0: every rank); a member's NCCL rank in the
  // group's communicator is its position here (ring order).
  std::vector<ProcessGroup> process_groups;
  // Which process groups need an NCCL communicator / barrier flags of their own.
  std::vector<bool> uses_nccl, uses_barrier;
};

// Throws std::logic_error if a group is not matched on every member of its process
// group, if members of a process group reach its NCCL calls (or its barriers) in
// different orders, or if a wait has no record on the same rank: the CUDA backend
// would hang or pair the wrong calls.
LaunchPlan plan_launches(const Dag& dag);

// The position of `global_rank` in process group `pg`'s communicator (NCCL's peer
// argument); throws std::logic_error when it is not a member.
int communicator_rank(const LaunchPlan& plan, int pg, int global_rank);

std::string format_launch_plan(const LaunchPlan& plan, const Dag& dag);
Json launch_plan_json(const LaunchPlan& plan, const Dag& dag);

}  // namespace tpsim
