#include "tpsim/cuda/measured_timeline.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/core/median.hpp"

namespace tpsim {

namespace {


Tick ms_to_tick(double ms) { return static_cast<Tick>(std::llround(ms * 1e9)); }

void check_samples(const Dag& dag, const std::vector<std::vector<OpSample>>& repeats) {
  if (repeats.empty()) throw std::invalid_argument("no repeat was measured");
  for (std::size_t r = 0; r < repeats.size(); ++r) {
    if (repeats[r].size() != dag.size())
      throw std::invalid_argument(fmt::format("repeat {} has {} op times for {} ops", r, repeats[r].size(), dag.size()));
    for (std::size_t i = 0; i < repeats[r].size(); ++i) {
      const OpSample& s = repeats[r][i];
      if (!(s.start_ms >= 0) || !(s.end_ms >= s.start_ms))
        throw std::invalid_argument(fmt::format("repeat {}, op {}: start {} ms, end {} ms", r, dag.op(static_cast<OpId>(i)).name,
                                                s.start_ms, s.end_ms));
    }
  }
}

}  // namespace

Timeline measured_timeline(const Dag& dag, const std::vector<std::vector<OpSample>>& repeats, const std::vector<int>& sm_count,
                           const std::map<OpId, double>& stand_ins) {
  check_samples(dag, repeats);
  Timeline tl;
  tl.detailed = true;
  tl.ops.resize(dag.size());
  for (std::size_t i = 0; i < dag.size(); ++i) {
    std::vector<double> starts, ends;
    for (const auto& rep : repeats) starts.push_back(rep[i].start_ms), ends.push_back(rep[i].end_ms);
    OpTiming& t = tl.ops[i];
    t.start = ms_to_tick(median(starts));
    t.end = std::max(t.start, ms_to_tick(median(ends)));  // medians taken apart can cross on a zero-length op
    t.issued = t.ready = t.launched = t.start;  // the host's enqueue time is not measured
  }
  if (!stand_ins.empty()) tl.details.resize(dag.size());
  for (const auto& [id, us] : stand_ins) {
    if (id >= dag.size()) throw std::invalid_argument(fmt::format("stand-in op {} is not in the DAG", id));
    tl.ops[id].stand_in = true;
    tl.details[id] = fmt::format("stand-in: every SM held for the simulated {:.1f} us (not run on the GPU)", us);
  }
  const auto ranks = static_cast<std::size_t>(dag.ranks());
  tl.sm_count = sm_count;
  tl.sm_count.resize(ranks, 1);
  tl.activity_recorded = false;  // CUDA events time ops, not SMs or link bytes
  tl.busy_sm_time.assign(ranks, 0.0);
  tl.busy_sms.assign(ranks, {});
  tl.egress_rate.assign(ranks, {});
  tl.egress_bytes.assign(ranks, 0.0);
  tl.egress_bytes_across_nodes.assign(ranks, 0.0);
  tl.egress_capacity.assign(ranks, 0.0);
  return tl;
}

double median_span_us(const std::vector<std::vector<OpSample>>& repeats, OpId op, bool from_zero) {
  return median_span_us(repeats, std::vector<OpId>{op}, from_zero);
}

double median_span_us(const std::vector<std::vector<OpSample>>& repeats, const std::vector<OpId>& ops, bool from_zero) {
  if (ops.empty()) throw std::invalid_argument("no op to measure");
  std::vector<double> spans;
  for (const auto& rep : repeats) {
    double start = rep.at(ops.front()).start_ms, end = rep.at(ops.front()).end_ms;
    for (OpId op : ops) start = std::min(start, rep.at(op).start_ms), end = std::max(end, rep.at(op).end_ms);
    spans.push_back((end - (from_zero ? 0.0 : start)) * 1e3);
  }
  if (spans.empty()) throw std::invalid_argument("no repeat was measured");
  return median(spans);
}

}  // namespace tpsim
