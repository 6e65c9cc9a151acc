// Confounded parameters: a sum the data pin while its parts are free, against parameters
// each measured on its own.
#include "support/catch.hpp"

#include "tpsim/calibration/identifiability.hpp"

using namespace tpsim;

TEST_CASE("Parameters the residuals see only as a sum are reported as confounded", "[calibration]") {
  // Two measurements of a + b (a prologue and a ramp in one short kernel, say), one of c.
  const Residuals sum_only = [](const std::vector<double>& x) {
    return std::vector<double>{x[0] + x[1] - 1.0, 2 * (x[0] + x[1]) - 2.1, x[2] - 0.3};
  };
  const auto pairs = confounded_pairs(sum_only, {0.5, 0.5, 0.3}, 1e-5);
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].a == 0);
  CHECK(pairs[0].b == 1);
  CHECK(pairs[0].correlation < -0.99);  // more of one is less of the other
  // A measurement of a alone, as sensitive to it as the sums are, separates them
  // (J^T J = [[14, 5], [5, 5]]: correlation -5 / sqrt(70) = -0.6).
  const Residuals separated = [&](const std::vector<double>& x) {
    auto r = sum_only(x);
    r.push_back(3 * (x[0] - 0.4));
    return r;
  };
  CHECK(confounded_pairs(separated, {0.4, 0.6, 0.3}, 1e-5).empty());
}

TEST_CASE("Independent parameters, and a single one, are never confounded", "[calibration]") {
  const Residuals each = [](const std::vector<double>& x) { return std::vector<double>{x[0] - 0.2, 3 * (x[1] - 0.7)}; };
  CHECK(confounded_pairs(each, {0.2, 0.7}, 1e-5).empty());
  // At a bound the step is one-sided and still finds the slope.
  CHECK(confounded_pairs(each, {0.0, 1.0}, 1e-5).empty());
  const Residuals one = [](const std::vector<double>& x) { return std::vector<double>{x[0]}; };
  CHECK(confounded_pairs(one, {0.5}, 1e-5).empty());
}
