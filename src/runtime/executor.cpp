#include "tpsim/runtime/executor.hpp"

#include <limits>
#include <memory>

#include <fmt/format.h>

#include "tpsim/core/simulator.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/hw/block_scheduler.hpp"
#include "tpsim/hw/copy_engines.hpp"
#include "tpsim/hw/fabric.hpp"
#include "tpsim/runtime/rendezvous.hpp"

namespace tpsim {

namespace {

struct StreamState {
  std::vector<OpId> ops;
  std::size_t head = 0;
  bool busy = false;
  Tick prev_end = 0;
  EventHandle wake;
};

struct RankState {
  double nvlink_bytes_per_ps = 0;  // NVLink traffic in and out: it is read from / written to HBM too
  std::unique_ptr<BlockScheduler> sms;
  std::unique_ptr<CopyEngines> copies;
  std::vector<StreamState> streams;
};

void add_sample(std::vector<Sample>& samples, Tick t, double v) {
  if (!samples.empty() && samples.back().time == t) samples.back().value = v;
  else samples.push_back({t, v});
}

class Machine {
 public:
  Machine(const Dag& dag, const HardwareSpec& hw)
      : dag_(dag), hw_(hw), fabric_(sim_, Topology(hw.fabric, dag.ranks())), rendezvous_(dag),
        kernel_of_(dag.size(), -1), waiters_(dag.size()) {
    tl_.ops.resize(dag.size());
    tl_.busy_sms.resize(static_cast<std::size_t>(dag.ranks()));
    tl_.egress_rate.resize(static_cast<std::size_t>(dag.ranks()));
    fabric_.set_rate_observer([this](Tick t, int g, double out, double in) {
      add_sample(tl_.egress_rate[static_cast<std::size_t>(g)], t, out);
      ranks_[static_cast<std::size_t>(g)].nvlink_bytes_per_ps = out + in;
    });
    for (int r = 0; r < dag.ranks(); ++r) {
      RankState rs;
      rs.sms = std::make_unique<BlockScheduler>(sim_, hw.sm);
      rs.sms->set_busy_observer([this, r](Tick t, int busy) { add_sample(tl_.busy_sms[static_cast<std::size_t>(r)], t, busy); });
      rs.copies = std::make_unique<CopyEngines>(sim_, fabric_, hw.copy_engines);
      rs.streams.resize(static_cast<std::size_t>(dag.streams(r)));
      for (OpId id : dag.program(r)) rs.streams[static_cast<std::size_t>(dag.op(id).stream)].ops.push_back(id);
      ranks_.push_back(std::move(rs));
      tl_.sm_count.push_back(hw.sm.count);
      tl_.egress_capacity.push_back(dag.ranks() > 1 ? fabric_.topology().egress_capacity(r) : 0.0);
    }
  }

  Timeline run() {
    issue_programs();
    for (int r = 0; r < dag_.ranks(); ++r)
      for (int s = 0; s < dag_.streams(r); ++s) advance(r, s);
    sim_.run();
    check_finished();
    tl_.events = sim_.events_fired();
    for (int r = 0; r < dag_.ranks(); ++r) {
      tl_.egress_bytes.push_back(fabric_.egress_bytes(r));
      tl_.blocks += ranks_[static_cast<std::size_t>(r)].sms->blocks_dispatched();
    }
    return std::move(tl_);
  }

 private:
  StreamState& stream_of(OpId id) {
    const Op& op = dag_.op(id);
    return ranks_[static_cast<std::size_t>(op.rank)].streams[static_cast<std::size_t>(op.stream)];
  }

  // The host thread enqueues in program order and never blocks (no host syncs in these DAGs).
  void issue_programs() {
    for (int r = 0; r < dag_.ranks(); ++r) {
      Tick host = 0;
      for (OpId id : dag_.program(r)) {
        const Op& op = dag_.op(id);
        if (runs_on_sms(op) || std::holds_alternative<CopyOp>(op.payload)) host += hw_.launch.host_overhead;
        tl_.ops[id].issued = host;
      }
    }
  }

  void advance(int rank, int stream) {
    StreamState& s = ranks_[static_cast<std::size_t>(rank)].streams[static_cast<std::size_t>(stream)];
    while (!s.busy && s.head < s.ops.size()) {
      const OpId id = s.ops[s.head];
      OpTiming& t = tl_.ops[id];
      const Tick ready = std::max(t.issued, s.prev_end);
      if (sim_.now() < ready) {
        if (!sim_.pending(s.wake)) s.wake = sim_.schedule_at(ready, [this, rank, stream] { advance(rank, stream); });
        return;
      }
      if (t.ready < 0) t.ready = ready;
      const Op& op = dag_.op(id);
      if (std::holds_alternative<RecordOp>(op.payload)) {
        complete_now(id);
        for (auto [r, st] : std::exchange(waiters_[id], {})) advance(r, st);
        continue;
      }
      if (const auto* w = std::get_if<WaitOp>(&op.payload)) {
        const OpId rec = dag_.record_of(w->event);
        if (!tl_.ops[rec].finished()) {
          waiters_[rec].emplace_back(rank, stream);
          return;
        }
        complete_now(id);
        continue;
      }
      s.busy = true;
      if (const auto* c = std::get_if<CopyOp>(&op.payload)) start_copy(id, *c);
      else sim_.schedule_after(hw_.launch.device_latency, [this, id] { launch_kernel(id); });
      return;
    }
  }

  void complete_now(OpId id) {
    OpTiming& t = tl_.ops[id];
    t.start = t.end = sim_.now();
    StreamState& s = stream_of(id);
    ++s.head;
    s.prev_end = sim_.now();
  }

  void finish(OpId id) {
    tl_.ops[id].end = sim_.now();
    StreamState& s = stream_of(id);
    s.busy = false;
    ++s.head;
    s.prev_end = sim_.now();
    advance(dag_.op(id).rank, dag_.op(id).stream);
  }

  void start_copy(OpId id, const CopyOp& c) {
    CopyRequest req;
    req.src = c.src_rank;
    req.dst = c.dst_rank;
    req.bytes = c.bytes;
    req.on_start = [this, id](int engine) {
      tl_.ops[id].start = sim_.now();
      tl_.ops[id].engine = engine;
    };
    req.on_done = [this, id] { finish(id); };
    ranks_[static_cast<std::size_t>(dag_.op(id).rank)].copies->submit(std::move(req));
  }

  void launch_kernel(OpId id) {
    const Op& op = dag_.op(id);
    KernelRequest req;
    req.on_first_block = [this, id] { tl_.ops[id].start = sim_.now(); };
    req.on_complete = [this, id] { finish(id); };
    OpTiming& t = tl_.ops[id];
    if (const auto* g = std::get_if<GemmOp>(&op.payload)) {
      const GemmPlan plan = plan_gemm(g->problem, hw_);
      t.detail = fmt::format("tile {}x{}x{}, split-k {}, {} blocks", plan.tile.m, plan.tile.n, plan.tile.k,
                             plan.split_k, plan.blocks);
      req.block = hw_.gemm.block;
      req.blocks = plan.blocks;
      req.draws_memory = true;
      // The kernel's ramp is paid by the blocks placed first; later waves run at pace.
      req.block_time = [plan, this, rank = op.rank, first = true](int mem) mutable {
        const Tick ramp = first ? hw_.gemm.kernel_ramp : 0;
        first = false;
        return ramp + gemm_block_time(plan, hw_, mem, hbm_left(rank));
      };
    } else if (const auto* e = std::get_if<ElementwiseOp>(&op.payload)) {
      const ElementwisePlan plan = plan_elementwise(e->bytes_read + e->bytes_written, hw_);
      t.detail = fmt::format("{} blocks", plan.blocks);
      req.block = hw_.elementwise.block;
      req.blocks = plan.blocks;
      req.draws_memory = true;
      req.block_time = [plan, this, rank = op.rank](int mem) {
        return elementwise_block_time(plan, hw_, mem, hbm_left(rank));
      };
    } else if (const auto* c = std::get_if<CollectiveOp>(&op.payload)) {
      const RingPlan plan = plan_ring(c->kind, c->buffer_bytes, dag_.ranks(), hw_, ring_link_capacity());
      t.detail = fmt::format("ring {}, {} channels", plan.protocol->name, plan.channels);
      req.block = BlockResources{plan.protocol->threads, plan.protocol->threads * hw_.nccl.registers_per_thread,
                                 hw_.nccl.shared_bytes, 1};
      req.blocks = plan.channels;
      req.held = true;
      const int group = c->group;
      req.on_resident = [this, id, group, plan] {
        rendezvous_.arrive(group, id, [this, plan](const std::vector<OpId>& members) { run_ring(members, plan); });
      };
    } else if (const auto* b = std::get_if<BarrierOp>(&op.payload)) {
      req.block = hw_.barrier.block;
      req.blocks = 1;
      req.held = true;
      const int group = b->group;
      req.on_resident = [this, id, group] {
        rendezvous_.arrive(group, id, [this](const std::vector<OpId>& members) {
          sim_.schedule_after(hw_.barrier.latency, [this, members] { release_all(members); });
        });
      };
    }
    kernel_of_[id] = ranks_[static_cast<std::size_t>(op.rank)].sms->launch(std::move(req));
  }

  // Every rank sends (n-1)/n of the buffer to its ring successor, pipelined over
  // the channels; the kernels finish together when the last chunk lands.
  void run_ring(const std::vector<OpId>& members, const RingPlan& plan) {
    sim_.schedule_after(plan.latency, [this, members, plan] {
      const std::size_t n = members.size();
      if (n < 2) return release_all(members);
      auto left = std::make_shared<std::size_t>(n);
      for (std::size_t i = 0; i < n; ++i) {
        const int src = dag_.op(members[i]).rank, dst = dag_.op(members[(i + 1) % n]).rank;
        const double cap = plan.protocol->bandwidth_efficiency * fabric_.topology().route_capacity(src, dst);
        fabric_.start(src, dst, plan.bytes_per_rank, cap, [this, members, left] {
          if (--*left == 0) release_all(members);
        });
      }
    });
  }

  // HBM bandwidth left to the SMs: copy engines and peers reading or writing this
  // GPU's memory over NVLink draw on the same HBM. Never below a tenth, so a model
  // with NVLink faster than HBM stays finite.
  double hbm_left(int rank) const {
    const double total = hw_.memory.hbm_bytes_per_ps;
    return std::max(0.1 * total, total - ranks_[static_cast<std::size_t>(rank)].nvlink_bytes_per_ps);
  }

  // NCCL's ring visits the ranks in order; its narrowest hop sets the pace.
  double ring_link_capacity() const {
    double c = std::numeric_limits<double>::infinity();
    for (int r = 0; r < dag_.ranks() && dag_.ranks() > 1; ++r)
      c = std::min(c, fabric_.topology().route_capacity(r, (r + 1) % dag_.ranks()));
    return c;
  }

  void release_all(const std::vector<OpId>& members) {
    for (OpId m : members) ranks_[static_cast<std::size_t>(dag_.op(m).rank)].sms->release(kernel_of_[m]);
  }

  void check_finished() const {
    std::vector<std::string> stuck;
    for (int r = 0; r < dag_.ranks(); ++r)
      for (int s = 0; s < dag_.streams(r); ++s) {
        const StreamState& st = ranks_[static_cast<std::size_t>(r)].streams[static_cast<std::size_t>(s)];
        if (st.head < st.ops.size())
          stuck.push_back(fmt::format("rank {} stream {} at '{}'", r, s, dag_.op(st.ops[st.head]).name));
      }
    if (!stuck.empty())
      throw StuckError(fmt::format("the op graph cannot finish; stuck: {}", fmt::join(stuck, "; ")));
  }

  const Dag& dag_;
  const HardwareSpec& hw_;
  Simulator sim_;
  Fabric fabric_;
  Rendezvous rendezvous_;
  std::vector<RankState> ranks_;
  std::vector<BlockScheduler::KernelId> kernel_of_;
  std::vector<std::vector<std::pair<int, int>>> waiters_;
  Timeline tl_;
};

}  // namespace

Timeline execute(const Dag& dag, const HardwareSpec& hw) {
  dag.validate();
  return Machine(dag, hw).run();
}

}  // namespace tpsim
