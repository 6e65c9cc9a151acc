#include "support/catch.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tpsim/core/parallel_for.hpp"

using namespace tpsim;

TEST_CASE("parallel_for runs every index exactly once whatever the thread count", "[core][parallel]") {
  for (unsigned jobs : {0u, 1u, 2u, 7u}) {
    std::vector<std::atomic<int>> runs(1000);
    parallel_for(runs.size(), jobs, [&](std::size_t i) { runs[i].fetch_add(1); });
    for (const auto& r : runs) CHECK(r.load() == 1);
  }
  int calls = 0;
  parallel_for(0, 4, [&](std::size_t) { ++calls; });  // nothing to do: no thread runs fn
  CHECK(calls == 0);
}

TEST_CASE("parallel_for rethrows the first failure and hands out no index after it", "[core][parallel]") {
  for (unsigned jobs : {1u, 3u}) {
    std::atomic<int> started{0};
    CHECK_THROWS_AS(parallel_for(100000, jobs,
                                 [&](std::size_t i) {
                                   started.fetch_add(1);
                                   if (i == 10) throw std::runtime_error("index 10");
                                   // Work of some length: an empty body lets the other threads
                                   // run out every index while the throw unwinds (a loaded
                                   // machine, a sanitizer's slow unwinding), which made this
                                   // check flaky.
                                   if (i > 10) std::this_thread::sleep_for(std::chrono::microseconds(20));
                                 }),
                    std::runtime_error);
    // Each thread stops at its next index once one has failed.
    CHECK(started.load() < 100000);
  }
}
