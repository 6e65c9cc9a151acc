#include "tpsim/step/step_simulator.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace tpsim {

std::string_view step_stream_name(StepStream s) {
  switch (s) {
    case StepStream::compute: return "compute";
    case StepStream::fsdp_gather: return "fsdp all-gather";
    case StepStream::fsdp_reduce: return "fsdp reduce-scatter";
    case StepStream::dp_reduce: return "dp all-reduce";
    case StepStream::pp_forward: return "pp send (activations)";
    case StepStream::pp_backward: return "pp send (gradients)";
    case StepStream::cp: return "cp K/V exchange";
    case StepStream::ep: return "ep all-to-all";
  }
  return "?";
}

StepTask communication_task(StepStream stream, std::string name, std::string dim, const GroupCollectiveCost& cost,
                            std::vector<int> deps) {
  StepTask task;
  task.stream = stream;
  task.name = std::move(name);
  task.dim = std::move(dim);
  task.work = cost.time;
  task.communication = true;
  task.tier = cost.tier;
  task.sms = cost.channels;
  task.wire_bytes = cost.wire_bytes;
  task.deps = std::move(deps);
  return task;
}

namespace {

struct Running {
  int task;
  double remaining;  // ps of work left at full rate
};

class StepRun {
 public:
  explicit StepRun(const StepProgram& p) : p_(p), n_(p.tasks.size()) {
    queues_.resize(static_cast<std::size_t>(p.stages) * kStepStreams);
    waiting_.resize(n_);
    dependents_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      const StepTask& t = p.tasks[i];
      if (t.stage < 0 || t.stage >= p.stages) throw std::logic_error("step task on a stage that does not exist");
      queues_[queue_of(t)].push_back(static_cast<int>(i));
      waiting_[i] = static_cast<int>(t.deps.size());
      for (int d : t.deps) {
        if (d < 0 || static_cast<std::size_t>(d) >= n_) throw std::logic_error("step task depends on a task that does not exist");
        dependents_[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
      }
    }
    head_.assign(queues_.size(), 0);
    busy_.assign(queues_.size(), false);
    result_.times.assign(n_, TaskTime{});
    result_.stages.assign(static_cast<std::size_t>(p.stages), StageSummary{});
    live_.assign(static_cast<std::size_t>(p.stages), 0.0);
    last_compute_end_.assign(static_cast<std::size_t>(p.stages), 0);
    idle_.resize(static_cast<std::size_t>(p.stages));
    busy_by_kind_.resize(static_cast<std::size_t>(p.stages));
    last_dep_.assign(n_, -1);
  }

  StepSimulation run() {
    start_ready();
    while (done_ < n_) {
      if (running_.empty()) throw std::logic_error("training step program is stuck (a dependency cycle)");
      // Next finish at the current rates.
      Tick next = kTickMax;
      for (const auto& r : running_) next = std::min(next, now_ + finish_in(r));
      const double dt = static_cast<double>(next - now_);
      std::vector<int> finished;
      std::vector<Running> still;
      for (auto& r : running_) {
        const bool ends = now_ + finish_in(r) == next;
        if (ends) finished.push_back(r.task);
        else still.push_back({r.task, r.remaining - rate(r.task) * dt});
      }
      now_ = next;
      running_ = std::move(still);
      ++result_.events;
      for (int t : finished) finish(t);
      start_ready();
    }
    for (const auto& st : result_.stages) result_.makespan = std::max(result_.makespan, st.end);
    // The tail: a stage done before the slowest waits for it (pipeline imbalance and drain).
    for (std::size_t s = 0; s < result_.stages.size(); ++s) {
      const Tick tail = result_.makespan - last_compute_end_[s];
      if (tail > 0) add_idle(static_cast<int>(s), tail_cause(static_cast<int>(s)), tail);
      for (const auto& [cause, t] : idle_[s]) result_.stages[s].idle_by_cause.emplace_back(cause, t);
      result_.stages[s].busy_by_kind = rounded(busy_by_kind_[s], result_.stages[s].compute_busy);
    }
    return std::move(result_);
  }

 private:
  std::size_t queue_of(const StepTask& t) const {
    return static_cast<std::size_t>(t.stage) * kStepStreams + static_cast<std::size_t>(t.stream);
  }

  // The link tier `tier` of `stage` now: its collectives, and the load of the compute task beside them.
  struct TierUse {
    int collectives = 0;
    double pass_load = 0;
  };
  TierUse tier_use(int stage, LinkTier tier) const {
    TierUse u;
    for (const auto& r : running_) {
      const StepTask& o = p_.tasks[static_cast<std::size_t>(r.task)];
      if (o.stage != stage) continue;
      if (!o.communication) u.pass_load += o.link_load.on(tier);
      else if (o.tier == tier) ++u.collectives;
    }
    u.pass_load = std::min(1.0, u.pass_load);
    return u;
  }

  // Max-min over a tier: the pass asks for its load, each collective for all of it.
  static double fair_share(const TierUse& use) { return 1.0 / (use.collectives + (use.pass_load > 0 ? 1 : 0)); }

  double rate(int task) const {
    const StepTask& t = p_.tasks[static_cast<std::size_t>(task)];
    if (!t.communication) {
      int held = 0;
      for (const auto& r : running_) {
        const StepTask& o = p_.tasks[static_cast<std::size_t>(r.task)];
        if (o.communication && o.stage == t.stage) held += o.sms;
      }
      held = std::min(held, p_.sm_count - 1);
      const double sm_rate = static_cast<double>(p_.sm_count - held) / p_.sm_count;
      // Granted less than it draws on a tier, its traffic sets the pace.
      double link_rate = 1.0;
      for (LinkTier tier : {LinkTier::nvlink, LinkTier::nic}) {
        if (t.link_load.on(tier) <= 0) continue;
        const TierUse use = tier_use(t.stage, tier);
        const double fair = fair_share(use);
        if (use.collectives > 0 && use.pass_load > fair) link_rate = std::min(link_rate, fair / use.pass_load);
      }
      return std::min(sm_rate, link_rate);
    }
    const TierUse use = tier_use(t.stage, t.tier);  // it counts itself among the collectives
    const double fair = fair_share(use);
    return use.pass_load > 0 && use.pass_load < fair ? (1.0 - use.pass_load) / use.collectives : fair;
  }

  Tick finish_in(const Running& r) const {
    if (r.remaining <= 0) return 0;
    return std::max<Tick>(1, static_cast<Tick>(std::ceil(r.remaining / rate(r.task))));
  }

  void start_ready() {
    bool again = true;
    while (again) {
      again = false;
      for (std::size_t q = 0; q < queues_.size(); ++q) {
        if (busy_[q] || head_[q] >= queues_[q].size()) continue;
        const int t = queues_[q][head_[q]];
        if (waiting_[static_cast<std::size_t>(t)] > 0) continue;
        busy_[q] = true;
        start(t);
        if (p_.tasks[static_cast<std::size_t>(t)].work == 0) again = true;  // zero-length tasks end at once, below
      }
      // Zero-work tasks finish now so their dependents can start in the same instant.
      std::vector<Running> keep;
      for (const auto& r : running_) {
        if (r.remaining <= 0) {
          finish(r.task);
          again = true;
        } else {
          keep.push_back(r);
        }
      }
      running_ = std::move(keep);
    }
  }

  void start(int task) {
    const StepTask& t = p_.tasks[static_cast<std::size_t>(task)];
    result_.times[static_cast<std::size_t>(task)].start = now_;
    if (t.stream == StepStream::compute) {
      const Tick gap = now_ - last_compute_end_[static_cast<std::size_t>(t.stage)];
      if (gap > 0) add_idle(t.stage, cause_of(task), gap);
    }
    running_.push_back({task, static_cast<double>(t.work)});
  }

  std::string cause_of(int task) const {
    const int d = last_dep_[static_cast<std::size_t>(task)];
    if (d < 0) return "other";
    const StepTask& dep = p_.tasks[static_cast<std::size_t>(d)];
    if (dep.communication) return dep.dim;
    return "pp";  // another stage's compute: the pipeline
  }

  void add_idle(int stage, const std::string& cause, Tick t) { idle_[static_cast<std::size_t>(stage)][cause] += t; }
  // Whole picoseconds summing to `busy` (the rounding remainder to the largest kind).
  static std::vector<std::pair<std::string, Tick>> rounded(const std::map<std::string, double>& shares, Tick busy) {
    std::vector<std::pair<std::string, Tick>> out;
    Tick given = 0;
    std::size_t largest = 0;
    for (const auto& [kind, ps] : shares) {
      const Tick t = static_cast<Tick>(std::llround(ps));
      if (t <= 0) continue;
      if (out.empty() || t > out[largest].second) largest = out.size();
      out.emplace_back(kind, t);
      given += t;
    }
    if (!out.empty()) out[largest].second += busy - given;
    return out;
  }

  // After a stage's last compute: its own collectives still running, else the slowest stage.
  std::string tail_cause(int stage) const {
    Tick latest = last_compute_end_[static_cast<std::size_t>(stage)];
    std::string cause = "pp";
    for (std::size_t i = 0; i < n_; ++i) {
      const StepTask& t = p_.tasks[i];
      if (t.stage == stage && t.communication && result_.times[i].end > latest) latest = result_.times[i].end, cause = t.dim;
    }
    return latest == result_.makespan ? cause : "pp";
  }

  void finish(int task) {
    const StepTask& t = p_.tasks[static_cast<std::size_t>(task)];
    auto& tt = result_.times[static_cast<std::size_t>(task)];
    tt.end = now_;
    ++done_;  // here, not in the event loop: zero-work tasks also end inside start_ready
    busy_[queue_of(t)] = false;
    ++head_[queue_of(t)];
    auto& st = result_.stages[static_cast<std::size_t>(t.stage)];
    st.end = std::max(st.end, now_);
    if (t.stream == StepStream::compute) {
      st.compute_busy += tt.end - tt.start;
      auto& busy = busy_by_kind_[static_cast<std::size_t>(t.stage)];
      if (t.mix >= 0)
        for (const auto& [kind, fraction] : p_.mixes[static_cast<std::size_t>(t.mix)]) busy[kind] += fraction * static_cast<double>(tt.end - tt.start);
      else if (tt.end > tt.start)
        busy["other"] += static_cast<double>(tt.end - tt.start);
      last_compute_end_[static_cast<std::size_t>(t.stage)] = now_;
    }
    double& live = live_[static_cast<std::size_t>(t.stage)];
    live += t.activation_bytes;
    st.peak_activation_bytes = std::max(st.peak_activation_bytes, live);
    for (int d : dependents_[static_cast<std::size_t>(task)]) {
      --waiting_[static_cast<std::size_t>(d)];
      last_dep_[static_cast<std::size_t>(d)] = task;  // dependencies end in time order: the last one set is the latest
    }
  }

  const StepProgram& p_;
  std::size_t n_;
  std::size_t done_ = 0;
  std::vector<std::vector<int>> queues_;
  std::vector<std::size_t> head_;
  std::vector<bool> busy_;
  std::vector<int> waiting_;
  std::vector<std::vector<int>> dependents_;
  std::vector<int> last_dep_;
  std::vector<Running> running_;
  std::vector<double> live_;
  std::vector<Tick> last_compute_end_;
  std::vector<std::map<std::string, Tick>> idle_;
  std::vector<std::map<std::string, double>> busy_by_kind_;  // per stage: compute time by kind, fractional
  Tick now_ = 0;
  StepSimulation result_;
};

}  // namespace

StepSimulation simulate_step(const StepProgram& program) { return StepRun(program).run(); }

}  // namespace tpsim
