#include "tpsim/dag/op.hpp"

namespace tpsim {

namespace {
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;
}  // namespace

std::string_view op_kind_name(const Op& op) {
  return std::visit(Overloaded{[](const GemmOp&) { return "gemm"; }, [](const CopyOp&) { return "copy"; },
                               [](const CollectiveOp&) { return "collective"; },
                               [](const BarrierOp&) { return "barrier"; },
                               [](const ElementwiseOp&) { return "elementwise"; },
                               [](const RecordOp&) { return "record"; }, [](const WaitOp&) { return "wait"; }},
                    op.payload);
}

OpClass op_class(const Op& op) {
  return std::visit(Overloaded{[](const GemmOp&) { return OpClass::compute; },
                               [](const ElementwiseOp&) { return OpClass::compute; },
                               [](const CopyOp&) { return OpClass::communication; },
                               [](const CollectiveOp&) { return OpClass::communication; },
                               [](const BarrierOp&) { return OpClass::synchronization; },
                               [](const RecordOp&) { return OpClass::event; },
                               [](const WaitOp&) { return OpClass::event; }},
                    op.payload);
}

bool runs_on_sms(const Op& op) {
  return std::holds_alternative<GemmOp>(op.payload) || std::holds_alternative<ElementwiseOp>(op.payload) ||
         std::holds_alternative<CollectiveOp>(op.payload) || std::holds_alternative<BarrierOp>(op.payload);
}

double op_flops(const Op& op) {
  if (const auto* g = std::get_if<GemmOp>(&op.payload)) return g->problem.flops();
  return 0.0;
}

double op_bytes(const Op& op) {
  return std::visit(Overloaded{[](const GemmOp& g) {
                                 const double e = dtype_bytes(g.problem.dtype);
                                 const auto& p = g.problem;
                                 return e * (double(p.m) * p.k + double(p.k) * p.n + double(p.m) * p.n);
                               },
                               [](const CopyOp& c) { return c.bytes; },
                               [](const CollectiveOp& c) { return c.buffer_bytes; },
                               [](const ElementwiseOp& e) { return e.bytes_read + e.bytes_written; },
                               [](const auto&) { return 0.0; }},
                    op.payload);
}

}  // namespace tpsim
