#include "tpsim/calibration/measurement_dag.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "tpsim/analysis/metrics.hpp"
#include "tpsim/runtime/executor.hpp"
#include "tpsim/io/workload_kinds.hpp"
#include "tpsim/strategies/flash_attention.hpp"

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

// The measurement's process groups: `groups` runs of `gpus` consecutive GPUs (one
// group is the world), over a DAG of gpus x groups ranks.
std::vector<int> measured_groups(Dag& dag, const Measurement& m) {
  if (m.groups == 1) return {Dag::kWorld};
  std::vector<int> out;
  for (int g = 0; g < m.groups; ++g) {
    std::vector<int> ranks;
    for (int i = 0; i < m.gpus; ++i) ranks.push_back(g * m.gpus + i);
    out.push_back(dag.add_process_group(std::move(ranks)));
  }
  return out;
}

// On every rank of every group, `payload(rendezvous)` (or `payload(rendezvous, ranks, i)` for
// the group's i-th rank) on `stream`; returns group 0's first rank's op.
template <typename Make>
OpId in_every_group(Dag& dag, const std::vector<int>& groups, int stream, const char* name, Make payload) {
  OpId first = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const int rendezvous = dag.new_group(groups[g]);
    const std::vector<int> ranks = dag.process_group(groups[g]).ranks;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      OpId id = 0;
      if constexpr (std::is_invocable_v<Make, int, const std::vector<int>&, std::size_t>)
        id = dag.add(ranks[i], stream, name, payload(rendezvous, ranks, i));
      else
        id = dag.add(ranks[i], stream, name, payload(rendezvous));
      if (g == 0 && i == 0) first = id;
    }
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
    case MeasurementKind::attention: {
      // The flash kernel and, around FlashAttention-2's backward, its two memory-bound kernels
      // (a profiler's row sums every flash kernel of the call).
      MeasurementDag md{Dag(1)};
      for (const auto& [name, op] : flash_attention_kernels(AttentionOp{m.attention}, "attention")) {
        const OpId id = md.dag.add(0, 0, name, op);
        if (std::holds_alternative<AttentionOp>(op)) md.target = id;
        else md.beside.push_back(id);
      }
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
    case MeasurementKind::elementwise: {
      MeasurementDag md{Dag(1)};
      md.target = md.dag.add(0, 0, "elementwise", m.elementwise);
      return md;
    }
    case MeasurementKind::all_gather:
    case MeasurementKind::reduce_scatter:
    case MeasurementKind::all_reduce: {
      MeasurementDag md{Dag(m.gpus * m.groups)};
      const auto kind = m.kind == MeasurementKind::all_gather       ? CollectiveKind::all_gather
                        : m.kind == MeasurementKind::reduce_scatter ? CollectiveKind::reduce_scatter
                                                                     : CollectiveKind::all_reduce;
      md.target = in_every_group(md.dag, measured_groups(md.dag, m), 0, "collective",
                                 [&](int group) { return CollectiveOp{kind, m.bytes, group}; });
      return md;
    }
    case MeasurementKind::all_to_all: {
      // As NCCL runs it: grouped send/recv, every rank 1/gpus of its buffer to each peer at
      // once and to itself (a copy in the same kernel).
      MeasurementDag md{Dag(m.gpus * m.groups)};
      md.target = in_every_group(md.dag, measured_groups(md.dag, m), 0, "all_to_all",
                                 [&](int rendezvous, const std::vector<int>& ranks, std::size_t i) {
                                   std::vector<Transfer> sends;
                                   for (int peer : ranks)
                                     if (peer != ranks[i]) sends.push_back({peer, m.bytes / m.gpus});
                                   return SendRecvOp{std::move(sends), rendezvous, m.bytes / m.gpus};
                                 });
      return md;
    }
    case MeasurementKind::send_recv: {
      // A ring step as NCCL runs it: every rank one message to the next (and one from the
      // one behind) in a grouped call on the communicator of all its group's ranks.
      MeasurementDag md{Dag(m.gpus * m.groups)};
      md.target = in_every_group(md.dag, measured_groups(md.dag, m), 0, "send_recv",
                                 [&](int rendezvous, const std::vector<int>& ranks, std::size_t i) {
                                   return SendRecvOp{{Transfer{ranks[(i + 1) % ranks.size()], m.bytes}}, rendezvous};
                                 });
      return md;
    }
    case MeasurementKind::barrier: {
      MeasurementDag md{Dag(m.gpus * m.groups)};
      md.target = in_every_group(md.dag, measured_groups(md.dag, m), 0, "barrier", [&](int group) { return BarrierOp{group}; });
      return md;
    }
    case MeasurementKind::launch: {
      MeasurementDag md{Dag(1)};
      md.target = md.dag.add(0, 0, "tiny_kernel", ElementwiseOp{4, 4});
      md.from_host_start = true;
      return md;
    }
    case MeasurementKind::gemm_with_peer_copy:
    case MeasurementKind::peer_copy_with_gemm: {
      // Both GPUs compute while each copies to the other (async TP's situation), launched
      // together; the row times the GEMM or the copy (microbench's copies are shorter than
      // their GEMMs, so they run wholly beside them).
      MeasurementDag md{Dag(2)};
      const OpId gemm = on_every_rank(md.dag, 2, 0, "gemm", [&](int) { return GemmOp{m.gemm}; });
      const OpId copy = on_every_rank(md.dag, 2, 1, "peer_copy", [&](int r) { return CopyOp{r, 1 - r, m.bytes}; });
      md.target = m.kind == MeasurementKind::gemm_with_peer_copy ? gemm : copy;
      return md;
    }
    case MeasurementKind::gemm_with_collective: {
      MeasurementDag md{Dag(m.gpus * m.groups)};
      in_every_group(md.dag, measured_groups(md.dag, m), 1, "collective",
                     [&](int group) { return CollectiveOp{m.collective, m.bytes, group}; });
      md.target = on_every_rank(md.dag, m.gpus * m.groups, 0, "gemm", [&](int) { return GemmOp{m.gemm}; });
      return md;
    }
    case MeasurementKind::gemm_pair: {
      // Launched together on two streams of one GPU, as async TP's steps on alternating streams:
      // the second takes SMs the first's partial wave leaves, and both share HBM.
      MeasurementDag md{Dag(1)};
      md.target = md.dag.add(0, 0, "gemm", GemmOp{m.gemm});
      md.beside.push_back(md.dag.add(0, 1, "gemm.beside", GemmOp{m.gemm}));
      return md;
    }
    case MeasurementKind::reduction: {
      MeasurementDag md{Dag(1)};
      md.target = md.dag.add(0, 0, "reduction", ReduceOp{m.partials, m.bytes, m.reduction});
      return md;
    }
    case MeasurementKind::scenario: break;
  }
  throw std::logic_error("measurement_dag: a scenario measurement has the scenario's DAG");
}

std::vector<OpId> MeasurementDag::spanned() const {
  std::vector<OpId> ops = {target};
  ops.insert(ops.end(), beside.begin(), beside.end());
  return ops;
}

double measured_span_us(const MeasurementDag& md, const Timeline& tl) {
  Tick start = tl.ops.at(md.target).start, end = tl.ops.at(md.target).end;
  for (OpId op : md.beside) start = std::min(start, tl.ops.at(op).start), end = std::max(end, tl.ops.at(op).end);
  return to_us(end - (md.from_host_start ? 0 : start));
}

OpId find_named_op(const Dag& dag, const Measurement& m) {
  if (m.op_rank >= 0 && m.op_rank < dag.ranks())
    for (OpId id : dag.program(m.op_rank))
      if (dag.op(id).name == m.op) return id;
  throw InputError(fmt::format("{}: variant \"{}\" has no op \"{}\" on rank {}", m.origin, m.scenario->variants.front(), m.op, m.op_rank));
}

namespace {

// The variant's DAG as built for `hw` run by the scenario's software (builders read the
// hardware, e.g. a fused kernel's grid), and that hardware, which runs it.
std::pair<Dag, HardwareSpec> scenario_dag(const Measurement& m, const HardwareSpec& hw) {
  Scenario s = *m.scenario;
  s.hardware = run_by(hw, s.software);
  Dag dag = build_dag(s, s.variants.front());
  return {std::move(dag), std::move(s.hardware)};
}

// A scenario measurement from its variant's simulated run: the makespan, as `tpsim run`
// reports it, or the named op's device time.
double scenario_span_us(const Measurement& m, const Dag& dag, const Timeline& tl) {
  if (m.op.empty()) return to_us(analyze(dag, tl).makespan);
  const OpTiming& t = tl.ops[find_named_op(dag, m)];
  return to_us(t.end - t.start);
}

// A benchmark's timed loop launches its op again right after itself: the launch row's tiny
// kernel and every op timed by events around it start the repeat gap after the one before.
HardwareSpec launched_after_itself(HardwareSpec hw) {
  hw.launch.device_latency = hw.launch.repeat_latency;
  return hw;
}

double op_level_us(const Measurement& m, const HardwareSpec& hw) {
  const MeasurementDag md = measurement_dag(m);
  const bool repeats = m.kind == MeasurementKind::launch;
  const double span = measured_span_us(md, execute(md.dag, repeats ? launched_after_itself(hw) : hw, false));
  // Timed by events around the launch: the kernel starts the repeat gap after the start event.
  return m.timing == MeasurementTiming::events ? span + to_us(hw.launch.repeat_latency) : span;
}

}  // namespace

double predict_us(const Measurement& m, const HardwareSpec& hw) {
  if (m.kind == MeasurementKind::scenario) {
    const auto [dag, as_run] = scenario_dag(m, hw);
    return scenario_span_us(m, dag, execute(dag, as_run, false));
  }
  const bool drop_nvls = !m.nccl_nvls && hw.nccl.nvls.present();  // NCCL as it ran: without NVLS, as a scenario's "nccl_nvls": false
  const bool burst = m.burst_clock && hw.power.burst_speed > 0;  // else at the parameters' rate (burst_clock_note)
  const bool flushed = m.l2_start != L2Start::back_to_back;       // priced where the hardware says how (l2_start_note)
  if (drop_nvls || burst || flushed) {
    HardwareSpec as_run = hw;
    if (drop_nvls) as_run.nccl.nvls = {};
    as_run.power.burst = burst;
    as_run.memory.l2_start = m.l2_start;
    return op_level_us(m, as_run);
  }
  return op_level_us(m, hw);
}

std::vector<double> predict_all_us(const std::vector<Measurement>& ms, const HardwareSpec& hw) {
  std::map<const Scenario*, std::pair<Dag, Timeline>> runs;
  std::vector<double> out;
  out.reserve(ms.size());
  for (const Measurement& m : ms) {
    if (m.kind != MeasurementKind::scenario) {
      out.push_back(predict_us(m, hw));
      continue;
    }
    auto it = runs.find(m.scenario.get());
    if (it == runs.end()) {
      auto [dag, as_run] = scenario_dag(m, hw);
      Timeline tl = execute(dag, as_run, false);
      it = runs.emplace(m.scenario.get(), std::make_pair(std::move(dag), std::move(tl))).first;
    }
    out.push_back(scenario_span_us(m, it->second.first, it->second.second));
  }
  return out;
}

}  // namespace tpsim
