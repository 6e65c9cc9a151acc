#pragma once
// Lowering an op DAG to what one host thread per GPU would enqueue on real
// CUDA streams: per rank, in program order, each call with its stream and
// arguments; cross-stream dependencies as cudaEventRecord / cudaStreamWaitEvent
// on per-rank event slots; collectives, send/recv and barriers by group with
// every rank's matching call. Pure host code: planned and tested without a GPU.
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
  int group = -1;       // collectives, send/recv, barriers: the group all ranks share
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
};

// Throws std::logic_error if a group is not matched on every rank or a wait
// has no record on the same rank (the CUDA backend could not run it).
LaunchPlan plan_launches(const Dag& dag);

std::string format_launch_plan(const LaunchPlan& plan, const Dag& dag);
Json launch_plan_json(const LaunchPlan& plan, const Dag& dag);

}  // namespace tpsim
