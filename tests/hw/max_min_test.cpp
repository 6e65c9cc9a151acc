#include "support/catch.hpp"

#include <limits>
#include <random>
#include <stdexcept>

#include "tpsim/hw/max_min.hpp"

using namespace tpsim;

namespace {
const double kNone = std::numeric_limits<double>::infinity();
}

TEST_CASE("max-min: flows on one link split it evenly", "[hw][max_min]") {
  const auto r = max_min_rates({{0}, {0}, {0}, {0}}, {8.0}, {kNone, kNone, kNone, kNone});
  for (double x : r) CHECK(x == Approx(2.0));
}

TEST_CASE("max-min: a flow held back elsewhere leaves its share to the others", "[hw][max_min]") {
  // Link 0 (1) carries flows a and b; link 1 (10) carries b and c: a = b = 0.5, c takes the rest.
  const auto r = max_min_rates({{0}, {0, 1}, {1}}, {1.0, 10.0}, {kNone, kNone, kNone});
  CHECK(r[0] == Approx(0.5));
  CHECK(r[1] == Approx(0.5));
  CHECK(r[2] == Approx(9.5));
  // A flow's own cap works the same way.
  const auto capped = max_min_rates({{0}, {0}}, {10.0}, {1.0, kNone});
  CHECK(capped[0] == Approx(1.0));
  CHECK(capped[1] == Approx(9.0));
}

TEST_CASE("max-min: a bundle of k flows is k separate flows", "[hw][max_min]") {
  const auto separate = max_min_rates({{0, 1}, {0, 1}, {0, 1}, {1}, {0}}, {6.0, 4.0}, {kNone, kNone, kNone, kNone, kNone});
  const auto bundled = max_min_rates({{0, 1}, {1}, {0}}, {6.0, 4.0}, {kNone, kNone, kNone}, {3.0, 1.0, 1.0});
  CHECK(bundled[0] == Approx(separate[0]));
  CHECK(bundled[1] == Approx(separate[3]));
  CHECK(bundled[2] == Approx(separate[4]));
}

TEST_CASE("max-min on the wire: a byte that takes twice a link's capacity gets half the rate there, its memory sees one",
          "[hw][max_min]") {
  // Link 0 (capacity 10): flow a puts 2 bytes on it per payload byte (protocol overhead), b 1.
  // Equal payload rates r: 2r + r = 10.
  const auto r = max_min_rates_on_wire({{0}, {0}}, {10.0}, {kNone, kNone}, {2.0, 1.0});
  CHECK(r[0] == Approx(10.0 / 3));
  CHECK(r[1] == Approx(10.0 / 3));
  CHECK(2 * r[0] + r[1] == Approx(10.0));  // the link is exactly full, never over
  // Alone, the wire holds it to half the link; a memory of 4 after it binds first, at the payload rate.
  CHECK(max_min_rates_on_wire({{0}}, {10.0}, {kNone}, {2.0})[0] == Approx(5.0));
  CHECK(max_min_rates_on_wire({{0, 1}}, {10.0, 4.0}, {kNone}, {2.0, 1.0})[0] == Approx(4.0));
  // A flow over two links with different overheads is held by the one that fills first:
  // 1.25 per byte of a 10 link (8) against 1 per byte of a 6 one (6).
  CHECK(max_min_rates_on_wire({{0, 1}}, {10.0, 6.0}, {kNone}, {1.25, 1.0})[0] == Approx(6.0));
  CHECK(max_min_rates_on_wire({{0, 1}}, {10.0, 9.0}, {kNone}, {1.25, 1.0})[0] == Approx(8.0));
  // Uses of one are plain max-min.
  const auto plain = max_min_rates({{0}, {0, 1}, {1}}, {1.0, 10.0}, {kNone, kNone, kNone});
  const auto ones = max_min_rates_on_wire({{0}, {0, 1}, {1}}, {1.0, 10.0}, {kNone, kNone, kNone}, {1.0, 1.0, 1.0, 1.0});
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(ones[i] == Approx(plain[i]));
  CHECK_THROWS_AS(max_min_rates_on_wire({{0, 1}}, {1.0, 1.0}, {kNone}, {1.0}), std::logic_error);
}

TEST_CASE("max-min never gives a link more than its capacity, and every flow is held by a full link", "[hw][max_min]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> link(0, 5);
  std::uniform_real_distribution<double> cap(1.0, 10.0);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> capacity(6);
    for (double& c : capacity) c = cap(rng);
    std::vector<std::vector<int>> paths(12);
    for (auto& p : paths) {
      const int a = link(rng), b = link(rng);
      p = a == b ? std::vector<int>{a} : std::vector<int>{a, b};
    }
    const auto r = max_min_rates(paths, capacity, std::vector<double>(paths.size(), kNone));
    std::vector<double> load(capacity.size(), 0.0);
    for (std::size_t i = 0; i < paths.size(); ++i)
      for (int l : paths[i]) load[static_cast<std::size_t>(l)] += r[i];
    for (std::size_t l = 0; l < capacity.size(); ++l) CHECK(load[l] <= capacity[l] * (1 + 1e-9));
    // Max-min: each flow crosses a full link on which no flow gets more than it does.
    for (std::size_t i = 0; i < paths.size(); ++i) {
      bool held = false;
      for (int l : paths[i]) {
        const auto k = static_cast<std::size_t>(l);
        if (load[k] < capacity[k] * (1 - 1e-9)) continue;
        bool largest = true;
        for (std::size_t j = 0; j < paths.size(); ++j)
          for (int m : paths[j])
            if (m == l && r[j] > r[i] * (1 + 1e-9)) largest = false;
        held = held || largest;
      }
      CHECK(held);
    }
  }
}
