#include "support/catch.hpp"

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "tpsim/step/pipeline_order.hpp"
#include "tpsim/step/step_simulator.hpp"

using namespace tpsim;

namespace {

// A pipeline with free communication: every chunk's forward costs tf / v, its backward tb / v,
// of which tw / v is the weight-gradient half a zero-bubble schedule runs on its own.
StepProgram pipeline(PipelineSchedule s, int pp, int v, int m, Tick tf, Tick tb, double activation = 0, Tick tw = 0) {
  StepProgram p;
  p.stages = pp;
  p.sm_count = 132;
  std::map<std::tuple<int, int, int>, int> done;  // (chunk, mb, pass) -> task
  std::vector<std::pair<int, std::tuple<int, int, int>>> pending;
  const int chunks = pp * v;
  for (int r = 0; r < pp; ++r)
    for (const PipelineWork& w : pipeline_order(s, pp, v, m, r)) {
      StepTask t;
      t.stage = r;
      const int pass = static_cast<int>(w.pass);
      t.name = fmt::format("chunk{}.mb{}.{}", w.chunk, w.microbatch, "FBIW"[pass]);
      switch (w.pass) {
        case PipelinePass::forward: t.work = tf / v, t.activation_bytes = activation; break;
        case PipelinePass::backward: t.work = tb / v, t.activation_bytes = -activation; break;
        case PipelinePass::backward_input: t.work = (tb - tw) / v; break;
        case PipelinePass::backward_weight: t.work = tw / v, t.activation_bytes = -activation; break;
      }
      const int id = p.add(t);
      // A whole backward and an input half both hand the gradient on (DualPipeV mixes them).
      const bool sends_back = w.pass == PipelinePass::backward || w.pass == PipelinePass::backward_input;
      const int handed = sends_back ? static_cast<int>(PipelinePass::backward) : pass;
      done[{w.chunk, w.microbatch, handed}] = id;
      if (w.forward() && w.chunk > 0) pending.push_back({id, {w.chunk - 1, w.microbatch, handed}});
      if (sends_back && w.chunk < chunks - 1) pending.push_back({id, {w.chunk + 1, w.microbatch, handed}});
    }
  for (const auto& [id, key] : pending) p.tasks[static_cast<std::size_t>(id)].deps.push_back(done.at(key));
  return p;
}

double bubble(const StepSimulation& s, int stage) {
  for (const auto& [cause, t] : s.stages[static_cast<std::size_t>(stage)].idle_by_cause)
    if (cause == "pp") return static_cast<double>(t) / static_cast<double>(s.makespan);
  return 0;
}

}  // namespace

TEST_CASE("with free communication the 1F1B and GPipe bubble is (p-1)/(m+p-1) on every stage", "[step][pipeline]") {
  for (PipelineSchedule sched : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe})
    for (auto [pp, m] : {std::pair{4, 4}, std::pair{4, 16}, std::pair{8, 8}, std::pair{2, 7}}) {
      const StepSimulation s = simulate_step(pipeline(sched, pp, 1, m, 1'000'000, 2'000'000));
      const double expected = static_cast<double>(pp - 1) / (m + pp - 1);
      INFO(fmt::format("{} pp {} m {}", pipeline_schedule_name(sched), pp, m));
      CHECK(s.makespan == static_cast<Tick>(m + pp - 1) * 3'000'000);
      for (int r = 0; r < pp; ++r) CHECK(bubble(s, r) == Approx(expected).epsilon(1e-9));
    }
}

TEST_CASE("interleaving shrinks the bubble to (p-1)/(v m + p-1) and never grows it", "[step][pipeline]") {
  for (auto [pp, m] : {std::pair{4, 8}, std::pair{4, 4}, std::pair{8, 16}})
    for (int v : {2, 4}) {
      const StepSimulation one = simulate_step(pipeline(PipelineSchedule::one_f_one_b, pp, 1, m, 4'000'000, 8'000'000));
      const StepSimulation inter = simulate_step(pipeline(PipelineSchedule::interleaved_1f1b, pp, v, m, 4'000'000, 8'000'000));
      INFO(fmt::format("pp {} m {} v {}", pp, m, v));
      CHECK(inter.makespan <= one.makespan);
      CHECK(bubble(inter, 0) <= bubble(one, 0));
      CHECK(bubble(inter, 0) == Approx(static_cast<double>(pp - 1) / (v * m + pp - 1)).epsilon(1e-6));
    }
}

TEST_CASE("1F1B keeps at most pp microbatches alive on the first stage - GPipe keeps all", "[step][pipeline][memory]") {
  const int pp = 4, m = 12;
  const auto one = simulate_step(pipeline(PipelineSchedule::one_f_one_b, pp, 1, m, 1000, 2000, 1.0));
  const auto gpipe = simulate_step(pipeline(PipelineSchedule::gpipe, pp, 1, m, 1000, 2000, 1.0));
  for (int r = 0; r < pp; ++r) {
    CHECK(one.stages[static_cast<std::size_t>(r)].peak_activation_bytes == pp - r);
    CHECK(gpipe.stages[static_cast<std::size_t>(r)].peak_activation_bytes == m);
  }
}

// PyTorch's ScheduleInterleavedZeroBubble orders, as its _calculate_single_rank_operations
// writes them (pytorch 1fd7abc2; printed as stage, F/I/W, microbatch).
std::string order_string(int pp, int v, int m, int rank) {
  std::string out;
  for (const PipelineWork& w : pipeline_order(PipelineSchedule::interleaved_zero_bubble, pp, v, m, rank))
    out += fmt::format("{}{}{}{}", out.empty() ? "" : " ", w.chunk, "FBIW"[static_cast<int>(w.pass)], w.microbatch);
  return out;
}

TEST_CASE("the zero-bubble order is PyTorch's ZB1P", "[step][pipeline][zero_bubble]") {
  CHECK(order_string(4, 1, 8, 0) == "0F0 0F1 0F2 0F3 0I0 0W0 0F4 0I1 0W1 0F5 0I2 0W2 0F6 0I3 0W3 0F7 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7");
  CHECK(order_string(4, 1, 8, 3) == "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 3F6 3I6 3W3 3F7 3I7 3W4 3W5 3W6 3W7");
  CHECK(order_string(2, 2, 4, 1) == "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 1I2 3W3 1I3 1W2 1W3");
  // Every chunk's microbatch runs F, then I, then W, each exactly once.
  for (int rank = 0; rank < 3; ++rank) {
    std::map<std::pair<int, int>, std::string> seen;
    for (const PipelineWork& w : pipeline_order(PipelineSchedule::interleaved_zero_bubble, 3, 2, 6, rank))
      seen[{w.chunk, w.microbatch}] += "FBIW"[static_cast<int>(w.pass)];
    CHECK(seen.size() == 12);
    for (const auto& [key, passes] : seen) CHECK(passes == "FIW");
  }
}

std::string zbv_string(int pp, int m, int rank) {
  std::string out;
  for (const PipelineWork& w : pipeline_order(PipelineSchedule::zbv_zero_bubble, pp, 2, m, rank))
    out += fmt::format("{}{}{}{}", out.empty() ? "" : " ", w.chunk, "FBIW"[static_cast<int>(w.pass)], w.microbatch);
  return out;
}

TEST_CASE("the ZBV order is PyTorch's, its chunks in a V", "[step][pipeline][zero_bubble]") {
  CHECK(zbv_string(2, 4, 0) == "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 0I3 0W3");
  CHECK(zbv_string(2, 4, 1) == "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3");
  CHECK(zbv_string(4, 4, 3) == "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 4I0 4W0 3I0 3W0 4I1 4W1 3I1 3W1 4I2 4W2 3I2 3W2 4I3 4W3 3I3 3W3");
  for (int c = 0; c < 8; ++c) CHECK(chunk_rank(PipelineSchedule::zbv_zero_bubble, 4, c) == (c < 4 ? c : 7 - c));
  CHECK(chunk_rank(PipelineSchedule::interleaved_zero_bubble, 4, 6) == 2);
}

TEST_CASE("splitting off the weight gradients shrinks the bubble and never lengthens the step", "[step][pipeline][zero_bubble]") {
  for (auto [pp, m] : {std::pair{4, 8}, std::pair{4, 4}, std::pair{8, 16}})
    for (int v : {1, 2}) {
      // Backward twice the forward, half of it weight gradients (a linear layer's dX and dW GEMMs).
      const StepSimulation base = simulate_step(pipeline(v == 1 ? PipelineSchedule::one_f_one_b : PipelineSchedule::interleaved_1f1b, pp, v, m,
                                                         4'000'000, 8'000'000));
      const StepSimulation zb = simulate_step(pipeline(PipelineSchedule::interleaved_zero_bubble, pp, v, m, 4'000'000, 8'000'000, 0, 4'000'000));
      INFO(fmt::format("pp {} m {} v {}", pp, m, v));
      CHECK(zb.makespan < base.makespan);
      CHECK(bubble(zb, 0) < bubble(base, 0));
      // Work is conserved: the step is at least every stage's own work.
      CHECK(zb.makespan >= static_cast<Tick>(m) * 12'000'000);
    }
  // With no weight gradient to move, the split schedule is no better than 1F1B's bubble.
  const StepSimulation none = simulate_step(pipeline(PipelineSchedule::interleaved_zero_bubble, 4, 1, 8, 4'000'000, 8'000'000));
  CHECK(none.makespan == static_cast<Tick>(8 + 4 - 1) * 12'000'000);
}

TEST_CASE("the DualPipeV order is PyTorch's: every microbatch of every chunk once forward, once backward", "[step][pipeline][zero_bubble]") {
  const auto order = [](int pp, int m, int rank) {
    std::string out;
    for (const PipelineWork& w : pipeline_order(PipelineSchedule::dualpipev, pp, 2, m, rank))
      out += fmt::format("{}{}{}{}", out.empty() ? "" : " ", w.chunk, "FBIW"[static_cast<int>(w.pass)], w.microbatch);
    return out;
  };
  CHECK(order(2, 4, 0) == "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 0W3");
  CHECK(order(2, 4, 1) == "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 2W3 1W3");
  for (int rank = 0; rank < 4; ++rank) {
    std::map<std::pair<int, int>, std::string> seen;
    for (const PipelineWork& w : pipeline_order(PipelineSchedule::dualpipev, 4, 2, 10, rank))
      seen[{w.chunk, w.microbatch}] += "FBIW"[static_cast<int>(w.pass)];
    CHECK(seen.size() == 20);
    for (const auto& [key, passes] : seen) CHECK((passes == "FB" || passes == "FIW"));
  }
  CHECK(chunk_rank(PipelineSchedule::dualpipev, 4, 6) == 1);
  // With free communication it runs every microbatch without deadlock and beats 1F1B's bubble.
  const StepSimulation one = simulate_step(pipeline(PipelineSchedule::one_f_one_b, 4, 1, 8, 4'000'000, 8'000'000));
  const StepSimulation dual = simulate_step(pipeline(PipelineSchedule::dualpipev, 4, 2, 8, 4'000'000, 8'000'000, 0, 4'000'000));
  CHECK(dual.makespan < one.makespan);
  CHECK(dual.makespan >= static_cast<Tick>(8) * 12'000'000);
}

TEST_CASE("with forward, input and weight halves of equal time the zero-bubble schedules leave under one forward per hop", "[step][pipeline][zero_bubble]") {
  for (auto [pp, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 16}}) {
    // Per chunk: F = I = W (Qi et al.'s condition for ZB-V's zero bubble).
    const StepSimulation inter = simulate_step(pipeline(PipelineSchedule::interleaved_1f1b, pp, 2, m, 4'000'000, 8'000'000));
    const StepSimulation zb = simulate_step(pipeline(PipelineSchedule::interleaved_zero_bubble, pp, 2, m, 4'000'000, 8'000'000, 0, 4'000'000));
    const StepSimulation v = simulate_step(pipeline(PipelineSchedule::zbv_zero_bubble, pp, 2, m, 4'000'000, 8'000'000, 0, 4'000'000));
    INFO(fmt::format("pp {} m {}: interleaved {} zb {} zbv {}", pp, m, inter.makespan, zb.makespan, v.makespan));
    CHECK(v.makespan <= zb.makespan);
    CHECK(zb.makespan < inter.makespan);
    // What is left is the warm-up's first forwards reaching the last rank: under one chunk-forward per hop.
    CHECK(v.makespan - static_cast<Tick>(m) * 12'000'000 < static_cast<Tick>(pp) * 2'000'000);
  }
}

TEST_CASE("zero bubble keeps activations until the weight gradients are taken", "[step][pipeline][memory][zero_bubble]") {
  const int pp = 4, m = 12;
  const auto one = simulate_step(pipeline(PipelineSchedule::one_f_one_b, pp, 1, m, 1000, 2000, 1.0));
  const auto zb = simulate_step(pipeline(PipelineSchedule::interleaved_zero_bubble, pp, 1, m, 1000, 2000, 1.0, 1000));
  for (int r = 0; r < pp; ++r) CHECK(zb.stages[static_cast<std::size_t>(r)].peak_activation_bytes >= one.stages[static_cast<std::size_t>(r)].peak_activation_bytes);
  // The last stage defers its first W by pp - 1 microbatches: that many more alive than 1F1B's one.
  CHECK(zb.stages[pp - 1].peak_activation_bytes == pp);
}

TEST_CASE("a compute task runs on the SMs a concurrent collective leaves", "[step][sharing]") {
  StepProgram p;
  p.sm_count = 100;
  StepTask compute;
  compute.name = "compute";
  compute.work = 100;
  StepTask comm;
  comm.name = "comm";
  comm.stream = StepStream::fsdp_gather;
  comm.communication = true;
  comm.dim = "fsdp";
  comm.sms = 50;
  comm.work = 50;
  p.add(compute);
  p.add(comm);
  const StepSimulation s = simulate_step(p);
  // Half speed while the collective holds half the SMs (25 of 100 done by t = 50), then full speed.
  CHECK(s.times[1].end == 50);
  CHECK(s.times[0].end == 125);
}

TEST_CASE("collectives of one rank share a link tier and not across tiers", "[step][sharing]") {
  for (bool same_tier : {true, false}) {
    StepProgram p;
    StepTask a;
    a.communication = true;
    a.work = 100;
    a.stream = StepStream::fsdp_gather;
    StepTask b = a;
    b.stream = StepStream::pp_forward;
    b.tier = same_tier ? LinkTier::nvlink : LinkTier::nic;
    p.add(a);
    p.add(b);
    const StepSimulation s = simulate_step(p);
    CHECK(s.makespan == (same_tier ? 200 : 100));
  }
}

TEST_CASE("a program with a dependency cycle is refused, not hung", "[step]") {
  StepProgram p;
  StepTask a;
  a.work = 10;
  a.deps = {1};
  StepTask b = a;
  b.stream = StepStream::pp_forward;
  b.deps = {0};
  p.add(a);
  p.add(b);
  CHECK_THROWS_AS(simulate_step(p), std::logic_error);
}

TEST_CASE("a zero-work task at the end of a program ends with it", "[step]") {
  // A wait with nothing to do (the CP loop's final dK/dV arrival) must not leave the run stuck.
  StepProgram p;
  p.sm_count = 132;
  StepTask work;
  work.name = "work";
  work.work = 1000;
  const int w = p.add(work);
  StepTask wait;
  wait.name = "wait";
  wait.deps = {w};
  p.add(wait);
  const StepSimulation s = simulate_step(p);
  CHECK(s.makespan == 1000);
  CHECK(s.times[1].end == 1000);
}

namespace {

// A layer pass whose TP traffic draws `load` of the NVLink alone, beside one collective on `tier`.
StepSimulation pass_beside_collective(double load, LinkTier tier, Tick pass_work = 1000, Tick collective_work = 100,
                                      bool load_on_nic = false) {
  StepProgram p;
  p.sm_count = 132;
  StepTask pass;
  pass.name = "layer0.forward.mb0";
  pass.work = pass_work;
  pass.link_load = load_on_nic ? PerTier{0, load} : PerTier{load, 0};
  StepTask collective;
  collective.name = "fsdp.all_gather.layer1";
  collective.stream = StepStream::fsdp_gather;
  collective.communication = true;
  collective.dim = "fsdp";
  collective.tier = tier;
  collective.work = collective_work;
  p.add(pass);
  p.add(collective);
  return simulate_step(p);
}

}  // namespace

TEST_CASE("a collective gets the NVLink a layer pass's TP traffic leaves, max-min fair", "[step][sharing]") {
  // Load 0.25 < the fair half: the pass keeps its quarter, the collective takes the other 3/4.
  CHECK(pass_beside_collective(0.25, LinkTier::nvlink).times[1].end == 134);  // 100 / 0.75, rounded up
  CHECK(pass_beside_collective(0.25, LinkTier::nvlink).times[0].end == 1000);
  // Load 0.5: each gets half; the pass is not slowed, the collective takes twice as long.
  CHECK(pass_beside_collective(0.5, LinkTier::nvlink).times[1].end == 200);
  CHECK(pass_beside_collective(0.5, LinkTier::nvlink).times[0].end == 1000);
  // No traffic: the collective runs as alone.
  CHECK(pass_beside_collective(0.0, LinkTier::nvlink).times[1].end == 100);
}

TEST_CASE("a layer pass granted less NVLink than its TP traffic draws slows in proportion", "[step][sharing]") {
  // Load 0.8 against one collective: each gets half, so the pass runs at 0.5 / 0.8 while the
  // collective (100 at half speed: 200) runs, then at full speed: 200 x 0.625 = 125 done by 200.
  const StepSimulation s = pass_beside_collective(0.8, LinkTier::nvlink);
  CHECK(s.times[1].end == 200);
  CHECK(s.times[0].end == 200 + (1000 - 125));
}

TEST_CASE("NVLink traffic of a layer pass leaves a collective on the NICs alone", "[step][sharing]") {
  const StepSimulation s = pass_beside_collective(0.9, LinkTier::nic);
  CHECK(s.times[1].end == 100);
  CHECK(s.times[0].end == 1000);
  // A TP group across nodes: its NIC traffic is what a collective on the NICs shares.
  const StepSimulation nic = pass_beside_collective(0.5, LinkTier::nic, 1000, 100, true);
  CHECK(nic.times[1].end == 200);
  CHECK(pass_beside_collective(0.5, LinkTier::nvlink, 1000, 100, true).times[1].end == 100);
}

TEST_CASE("the pass and the collectives never draw more than the link between them", "[step][sharing]") {
  // Conservation: with n collectives beside a pass of load u, the bytes through the link while
  // they overlap are at most its capacity x time (every task's work is time at the full link).
  for (double load : {0.1, 0.3, 0.5, 0.9, 1.0})
    for (int n : {1, 2, 3}) {
      StepProgram p;
      p.sm_count = 132;
      StepTask pass;
      pass.work = 1'000'000;
      pass.link_load = {load, 0};
      p.add(pass);
      const StepStream streams[] = {StepStream::fsdp_gather, StepStream::fsdp_reduce, StepStream::dp_reduce};
      for (int i = 0; i < n; ++i) {
        StepTask c;
        c.communication = true;
        c.stream = streams[i];
        c.work = 100'000;
        p.add(c);
      }
      const StepSimulation s = simulate_step(p);
      // All collectives end together at T; the link carried n x 100,000 of their work plus the
      // pass's share of its traffic: progress(T) x load x pass work.
      const double t_end = static_cast<double>(s.times[1].end);
      const double fair = 1.0 / (n + 1);
      const double pass_rate = load > fair ? fair / load : 1.0;
      INFO(fmt::format("load {} collectives {}", load, n));
      CHECK(n * 100'000.0 + pass_rate * t_end * load <= t_end * (1 + 1e-5));
      CHECK(s.times[0].end >= 1'000'000);
    }
}
