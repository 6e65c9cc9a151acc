#include "support/catch.hpp"

#include "tpsim/hw/hbm_pool.hpp"

using namespace tpsim;

namespace {

// A streaming block: no math, `bytes`, at most `cap` bytes/ps.
BlockWork stream(double bytes, double cap) { return BlockWork{.bytes = bytes, .max_bytes_per_ps = cap}; }

}  // namespace

TEST_CASE("Two memory-bound kernels overlapped never beat the HBM bound", "[hw][hbm]") {
  Simulator sim;
  HbmPool hbm(sim, 2.0);  // 2 bytes/ps
  Tick a_end = 0, b_end = 0;
  hbm.add(100, stream(1e6, 1.0), [&] { a_end = sim.now(); });
  sim.schedule_at(20000, [&] { hbm.add(100, stream(2e6, 1.0), [&] { b_end = sim.now(); }); });
  sim.run();
  const double total_bytes = 100 * 1e6 + 100 * 2e6;
  CHECK(std::max(a_end, b_end) >= total_bytes / 2.0);
  // Work conserving: the pool is never idle while a stream has bytes left.
  CHECK(std::max(a_end, b_end) == Approx(total_bytes / 2.0).epsilon(1e-6));
}

TEST_CASE("A stream that joins later slows the one already running, and speeds it up when it leaves", "[hw][hbm]") {
  Simulator sim;
  HbmPool hbm(sim, 1.0);
  Tick alone = 0;
  {
    Simulator s2;
    HbmPool h2(s2, 1.0);
    h2.add(10, stream(1e5, 1.0), [&] { alone = s2.now(); });
    s2.run();
  }
  CHECK(alone == 1000000);  // 1e6 bytes at 1 byte/ps
  Tick first = 0;
  hbm.add(10, stream(1e5, 1.0), [&] { first = sim.now(); });
  sim.schedule_at(500000, [&] { hbm.add(10, stream(1e4, 1.0), [] {}); });
  sim.run();
  // Half done alone; then 20 blocks share: the newcomer (1e5 bytes in all) takes 2e5 ps at
  // half rate, during which the first moves 1e5 bytes; the last 4e5 bytes go at full rate.
  CHECK(first == Approx(500000 + 200000 + 400000).epsilon(1e-6));
}

TEST_CASE("Max-min: a stream capped below its fair share leaves the rest to the others", "[hw][hbm]") {
  Simulator sim;
  HbmPool hbm(sim, 1.0);
  Tick slow = 0, fast = 0;
  hbm.add(1, stream(1e4, 0.1), [&] { slow = sim.now(); });   // capped at 0.1
  hbm.add(1, stream(9e4, 1.0), [&] { fast = sim.now(); });   // gets the other 0.9
  CHECK(hbm.drawn() == Approx(1.0));
  sim.run();
  CHECK(slow == 100000);
  CHECK(fast == 100000);
}

TEST_CASE("Compute-bound blocks take their math time however much HBM is free", "[hw][hbm]") {
  Simulator sim;
  HbmPool hbm(sim, 100.0);
  Tick done = 0;
  hbm.add(4, BlockWork{.compute = 5000, .bytes = 1000, .max_bytes_per_ps = 1.0}, [&] { done = sim.now(); });  // needs only 0.2 bytes/ps per block
  CHECK(hbm.drawn() == Approx(0.8));
  sim.run();
  CHECK(done == 5000);
}

TEST_CASE("Less capacity (link traffic) re-times the streams, and none is ever drawn above capacity", "[hw][hbm]") {
  Simulator sim;
  HbmPool hbm(sim, 1.0);
  Tick done = 0;
  hbm.add(1, stream(1e6, 1.0), [&] { done = sim.now(); });
  sim.schedule_at(500000, [&] {
    hbm.set_capacity(0.25);
    CHECK(hbm.drawn() <= 0.25 + 1e-12);
  });
  sim.run();
  CHECK(done == Approx(500000 + 2000000).epsilon(1e-6));
}
