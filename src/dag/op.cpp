#include "tpsim/dag/op.hpp"

#include "tpsim/core/overloaded.hpp"

namespace tpsim {

std::string_view op_kind_name(const Op& op) {
  return std::visit(Overloaded{[](const GemmOp&) { return "gemm"; }, [](const CopyOp&) { return "copy"; },
                               [](const CollectiveOp&) { return "collective"; },
                               [](const BarrierOp&) { return "barrier"; },
                               [](const SendRecvOp&) { return "sendrecv"; },
                               [](const FusedRingGemmOp&) { return "fused_gemm"; },
                               [](const AttentionOp&) { return "attention"; },
                               [](const ElementwiseOp& e) { return e.layout_copy ? "layout_copy" : "elementwise"; },
                               [](const ReduceOp&) { return "reduction"; },
                               [](const RecordOp&) { return "record"; }, [](const WaitOp&) { return "wait"; }},
                    op.payload);
}

OpClass op_class(const Op& op) {
  return std::visit(Overloaded{[](const GemmOp&) { return OpClass::compute; },
                               [](const ElementwiseOp&) { return OpClass::compute; },
                               [](const ReduceOp&) { return OpClass::compute; },
                               [](const CopyOp&) { return OpClass::communication; },
                               [](const CollectiveOp&) { return OpClass::communication; },
                               [](const BarrierOp&) { return OpClass::synchronization; },
                               [](const SendRecvOp&) { return OpClass::communication; },
                               [](const FusedRingGemmOp&) { return OpClass::compute; },
                               [](const AttentionOp&) { return OpClass::compute; },
                               [](const RecordOp&) { return OpClass::event; },
                               [](const WaitOp&) { return OpClass::event; }},
                    op.payload);
}

bool runs_on_sms(const Op& op) {
  return !std::holds_alternative<CopyOp>(op.payload) && !std::holds_alternative<RecordOp>(op.payload) &&
         !std::holds_alternative<WaitOp>(op.payload);
}

std::string_view host_issue_name(HostIssue h) {
  switch (h) {
    case HostIssue::compiled: return "compiled";
    case HostIssue::eager: return "eager";
    case HostIssue::cuda_graph: return "cuda_graph";
    case HostIssue::enqueued: return "enqueued";
  }
  return "?";
}

std::optional<HostIssue> parse_host_issue(std::string_view s) {
  if (s == "compiled") return HostIssue::compiled;
  if (s == "eager") return HostIssue::eager;
  if (s == "cuda_graph") return HostIssue::cuda_graph;
  if (s == "enqueued") return HostIssue::enqueued;
  return std::nullopt;
}

int rendezvous_group(const Op& op) {
  return std::visit(Overloaded{[](const CollectiveOp& c) { return c.group; }, [](const BarrierOp& b) { return b.group; },
                               [](const SendRecvOp& s) { return s.group; }, [](const FusedRingGemmOp& f) { return f.group; },
                               [](const auto&) { return -1; }},
                    op.payload);
}

double op_flops(const Op& op) {
  if (const auto* g = std::get_if<GemmOp>(&op.payload)) return g->problem.flops();
  if (const auto* f = std::get_if<FusedRingGemmOp>(&op.payload)) return f->steps * f->step.flops();
  if (const auto* a = std::get_if<AttentionOp>(&op.payload)) return attention_flops(*a);
  return 0.0;
}

double op_bytes(const Op& op) {
  return std::visit(Overloaded{[](const GemmOp& g) { return dtype_bytes(g.problem.dtype) * g.problem.operand_elements(); },
                               [](const CopyOp& c) { return c.bytes; },
                               [](const CollectiveOp& c) { return c.buffer_bytes; },
                               [](const SendRecvOp& s) {
                                 double b = s.self_bytes;
                                 for (const auto& t : s.sends) b += t.bytes;
                                 return b;
                               },
                               [](const FusedRingGemmOp& f) { return f.send_bytes * (f.steps - 1); },
                               [](const AttentionOp& a) { return attention_bytes(a); },
                               [](const ElementwiseOp& e) { return e.bytes_read + e.bytes_written; },
                               [](const ReduceOp& r) { return (r.inputs + 1) * r.out_bytes; },
                               [](const auto&) { return 0.0; }},
                    op.payload);
}

}  // namespace tpsim
