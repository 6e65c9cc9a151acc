#include "tpsim/calibration/measurement_dag.hpp"

#include <stdexcept>

#include "tpsim/analysis/metrics.hpp"
#include "tpsim/runtime/executor.hpp"
#include "tpsim/strategies/registry.hpp"

namespace tpsim {

namespace {

// `gpus` ranks each running `payload(rank)` on stream `stream`; returns rank 0's op.
template <typename Make>
OpId on_every_rank(Dag& dag, int gpus, int stream, const char* name, Make payload) {
  OpId first = 0;
  for (int r = 0; r < gpus; ++r) {
    const OpId id = dag.add(r, stream, name, payload(r));
    if (r == 0) first = id;
  }
  return first;
}

}  // namespace

MeasurementDag measurement_dag(const Measurement& m) {
  switch (m.kind) {
    case MeasurementKind::gemm: {
      MeasurementDag md{Dag(1)};
      md.target = md.dag.add(0, 0, "gemm", GemmOp{m.gemm});
      return md;
    }
    case MeasurementKind::peer_copy: {
      MeasurementDag md{Dag(2)};
      md.target = md.dag.add(0, 0, "peer_copy", CopyOp{0, 1, m.bytes});
      return md;
    }
    case MeasurementKind::local_copy: {
      MeasurementDag md{Dag(1)};
      md.target = md.dag.add(0, 0, "local_copy", ElementwiseOp{m.bytes, m.bytes});
      return md;
    }
    case MeasurementKind::all_gather:
    case MeasurementKind::reduce_scatter: {
      MeasurementDag md{Dag(m.gpus)};
      const int group = md.dag.new_group();
      const auto kind = m.kind == MeasurementKind::all_gather ? CollectiveKind::all_gather : CollectiveKind::reduce_scatter;
      md.target = on_every_rank(md.dag, m.gpus, 0, "collective", [&](int) { return CollectiveOp{kind, m.bytes, group}; });
      return md;
    }
    case MeasurementKind::barrier: {
      MeasurementDag md{Dag(m.gpus)};
      const int group = md.dag.new_group();
      md.target = on_every_rank(md.dag, m.gpus, 0, "barrier", [&](int) { return BarrierOp{group}; });
      return md;
    }
    case MeasurementKind::launch: {
      MeasurementDag md{Dag(1)};
      md.target = md.dag.add(0, 0, "tiny_kernel", ElementwiseOp{4, 4});
      md.from_host_start = true;
      return md;
    }
    case MeasurementKind::gemm_with_peer_copy: {
      // Both GPUs compute while each copies to the other: async TP's situation.
      MeasurementDag md{Dag(2)};
      md.target = on_every_rank(md.dag, 2, 0, "gemm", [&](int) { return GemmOp{m.gemm}; });
      on_every_rank(md.dag, 2, 1, "peer_copy", [&](int r) { return CopyOp{r, 1 - r, m.bytes}; });
      return md;
    }
    case MeasurementKind::gemm_with_collective: {
      MeasurementDag md{Dag(m.gpus)};
      const int group = md.dag.new_group();
      on_every_rank(md.dag, m.gpus, 1, "collective", [&](int) { return CollectiveOp{m.collective, m.bytes, group}; });
      md.target = on_every_rank(md.dag, m.gpus, 0, "gemm", [&](int) { return GemmOp{m.gemm}; });
      return md;
    }
    case MeasurementKind::scenario: break;
  }
  throw std::logic_error("measurement_dag: a scenario measurement has the scenario's DAG");
}

double measured_span_us(const MeasurementDag& md, const Timeline& tl) {
  const OpTiming& t = tl.ops.at(md.target);
  return to_us(t.end - (md.from_host_start ? 0 : t.start));
}

double predict_us(const Measurement& m, const HardwareSpec& hw) {
  if (m.kind == MeasurementKind::scenario) {
    const Dag dag = build_dag(*m.scenario, m.scenario->variants.front());
    return to_us(analyze(dag, execute(dag, hw, false)).makespan);  // as `tpsim run` reports it
  }
  const MeasurementDag md = measurement_dag(m);
  return measured_span_us(md, execute(md.dag, hw, false));
}

}  // namespace tpsim
