#pragma once
// The typed operations a strategy emits. Each op runs on one rank and one stream;
// the payload says what it is. Sizes are in elements or bytes as named.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tpsim/cost/attention_cost.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/nccl_cost.hpp"

namespace tpsim {

struct GemmOp {
  GemmProblem problem;
};
struct CopyOp {  // peer copy on the issuing rank's copy engine
  int src_rank = 0, dst_rank = 0;
  double bytes = 0;
};
struct CollectiveOp {  // NCCL ring collective over all ranks of the group
  CollectiveKind kind = CollectiveKind::all_gather;
  double buffer_bytes = 0;  // the whole gathered buffer (AG output / RS input)
  int group = 0;            // ops with the same group rendezvous across ranks
};
struct BarrierOp {  // symmetric-memory barrier: signal every peer, wait for all
  int group = 0;
};
struct Transfer {
  int peer = 0;
  double bytes = 0;
};
struct SendRecvOp {  // NCCL send/recv (grouped): an SM kernel holding p2p channel blocks
  std::vector<Transfer> sends;  // what this rank sends; it receives what peers send it
  int group = 0;                // every rank's matching send/recv of this step
  double self_bytes = 0;        // what it sends itself (an all-to-all's own share): NCCL's
                                // kernel copies it on channels of its own, no link crossed
};
struct FusedRingGemmOp {  // one persistent kernel (grid = SMs): per step a submatmul whose
                          // operand tiles stream to the next rank as they are loaded, then a sync
  GemmProblem step;       // the submatmul of one step
  int steps = 0;
  int send_to = 0;        // ring successor
  double send_bytes = 0;  // per step (none after the last)
  int group = 0;
};
using AttentionOp = AttentionProblem;  // flash attention on this rank's heads (cost/attention_cost.hpp)
struct ElementwiseOp {  // memory-bound SM kernel (local copy, reduction)
  double bytes_read = 0, bytes_written = 0;
  double elements = 0;  // the output's elements, for an unvectorized loop's per-element cost
  ElementLoop loop = ElementLoop::vectorized;
  // A `strided` loop's operands: the output and every input whose offset it computes for each
  // element (an expanded copy 2, a product with a broadcast operand 3), and the dimensions its
  // offset calculator keeps once TensorIterator has merged what it can (a product with a
  // per-row operand 2; repeat_kv's expand 3).
  int operands = 0;
  int dims = 2;
  double row = 0;  // a `row_reduction` loop's row length in elements
  // A copy that only lays a tensor out for the next op (PyTorch's chunk + cat around a TP
  // collective, a fused op's flatten): timed as any copy, reported as its own kind.
  bool layout_copy = false;
};
struct ReduceOp {  // sums `inputs` stacked partials (each `out_bytes`) into one output, fp32 accumulation
  int inputs = 0;
  double out_bytes = 0;
  ReductionKernel kernel = ReductionKernel::aten_sum;
};
struct RecordOp {
  int event = 0;
};
struct WaitOp {
  int event = 0;
};

using OpPayload = std::variant<GemmOp, CopyOp, CollectiveOp, BarrierOp, SendRecvOp, FusedRingGemmOp, AttentionOp,
                               ElementwiseOp, ReduceOp, RecordOp, WaitOp>;

struct Op {
  std::string name;  // e.g. "ag_mm.step3.matmul"
  int rank = 0;
  int stream = 0;
  OpPayload payload;
};

// How each rank's host thread puts the program's ops on the GPU: from compiled
// code (every kernel or copy one launch call), op by op from eager PyTorch (Python
// and the dispatcher per op), by replaying a captured CUDA graph, or `enqueued`: every
// op already queued before the GPU reached it, as in a benchmark that sleeps the GPU
// before issuing its timed loop.
enum class HostIssue { compiled, eager, cuda_graph, enqueued };
std::string_view host_issue_name(HostIssue h);
std::optional<HostIssue> parse_host_issue(std::string_view s);

// The rendezvous group of a collective, barrier, send/recv or fused op; -1 for others.
int rendezvous_group(const Op& op);

enum class OpClass { compute, communication, synchronization, event };

std::string_view op_kind_name(const Op& op);  // "gemm", "copy", "collective", ...
OpClass op_class(const Op& op);
bool runs_on_sms(const Op& op);  // a kernel (holds blocks) rather than an engine or stream op
double op_flops(const Op& op);
double op_bytes(const Op& op);   // bytes moved (memory or wire)

}  // namespace tpsim
