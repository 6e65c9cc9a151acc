#include "support/catch.hpp"

#include <thread>
#include <vector>

#include "tpsim/core/simulator.hpp"

using namespace tpsim;

TEST_CASE("Events fire in time order, and in insertion order at equal times", "[core]") {
  Simulator sim;
  std::vector<int> order;
  sim.schedule_at(30, [&] { order.push_back(3); });
  sim.schedule_at(10, [&] { order.push_back(1); });
  sim.schedule_at(20, [&] { order.push_back(2); });
  sim.schedule_at(20, [&] { order.push_back(22); });
  sim.run();
  CHECK(order == std::vector<int>{1, 2, 22, 3});
  CHECK(sim.now() == 30);
  CHECK(sim.events_fired() == 4);
}

TEST_CASE("A cancelled event never fires and its handle reports it gone", "[core]") {
  Simulator sim;
  int fired = 0;
  EventHandle a = sim.schedule_at(5, [&] { fired += 1; });
  EventHandle b = sim.schedule_at(6, [&] { fired += 10; });
  CHECK(sim.pending(a));
  CHECK(sim.cancel(a));
  CHECK_FALSE(sim.pending(a));
  CHECK_FALSE(sim.cancel(a));
  sim.run();
  CHECK(fired == 10);
  CHECK_FALSE(sim.pending(b));
}

TEST_CASE("A recycled slot does not revive a stale handle", "[core]") {
  Simulator sim;
  int fired = 0;
  EventHandle a = sim.schedule_at(5, [&] { ++fired; });
  EventHandle stale = a;
  sim.cancel(a);
  sim.schedule_at(7, [&] { fired += 100; });  // reuses a's slot
  CHECK_FALSE(sim.cancel(stale));
  sim.run();
  CHECK(fired == 100);
}

TEST_CASE("Events scheduled from callbacks run, and never in the past", "[core]") {
  Simulator sim;
  std::vector<Tick> times;
  sim.schedule_at(100, [&] {
    sim.schedule_after(5, [&] { times.push_back(sim.now()); });
    sim.schedule_at(50, [&] { times.push_back(sim.now()); });  // clamped to now
  });
  sim.run();
  CHECK(times == std::vector<Tick>{100, 105});
}

TEST_CASE("Independent simulators run in parallel threads without interference", "[core]") {
  auto chain = [](int n) {
    Simulator sim;
    std::int64_t sum = 0;
    std::function<void(int)> step = [&](int i) {
      sum += sim.now();
      if (i < n) sim.schedule_after(i, [&, i] { step(i + 1); });
    };
    sim.schedule_at(0, [&] { step(0); });
    sim.run();
    return sum;
  };
  const auto expected = chain(2000);
  std::vector<std::int64_t> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { got[static_cast<std::size_t>(t)] = chain(2000); });
  for (auto& t : threads) t.join();
  for (auto g : got) CHECK(g == expected);
}

TEST_CASE("Time past the end of the 64-bit clock stops the run instead of wrapping", "[core]") {
  Simulator sim;
  sim.schedule_at(kTickMax - 10, [&] { CHECK_THROWS_AS(sim.schedule_after(11, [] {}), SimulationLimit); });
  sim.run();
  CHECK_THROWS_AS(duration_for(1e30, 1e-3), SimulationLimit);
  CHECK(duration_for(10.0, 4.0) == 3);  // rounded up: never before the last byte
}
