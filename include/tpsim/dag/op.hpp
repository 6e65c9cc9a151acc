#pragma once
// The typed operations a strategy emits. Each op runs on one rank and one stream;
// the payload says what it is. Sizes are in elements or bytes as named.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

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
struct ElementwiseOp {  // memory-bound SM kernel (local copy, reduction)
  double bytes_read = 0, bytes_written = 0;
};
struct RecordOp {
  int event = 0;
};
struct WaitOp {
  int event = 0;
};

using OpPayload = std::variant<GemmOp, CopyOp, CollectiveOp, BarrierOp, ElementwiseOp, RecordOp, WaitOp>;

struct Op {
  std::string name;  // e.g. "ag_mm.step3.matmul"
  int rank = 0;
  int stream = 0;
  OpPayload payload;
};

enum class OpClass { compute, communication, synchronization, event };

std::string_view op_kind_name(const Op& op);  // "gemm", "copy", "collective", ...
OpClass op_class(const Op& op);
bool runs_on_sms(const Op& op);  // a kernel (holds blocks) rather than an engine or stream op
double op_flops(const Op& op);
double op_bytes(const Op& op);   // bytes moved (memory or wire)

}  // namespace tpsim
