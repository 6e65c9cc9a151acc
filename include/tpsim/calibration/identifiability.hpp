#pragma once
// Which fitted parameters the measurements cannot tell apart. Near the optimum of a
// least-squares fit, the inverse of J^T J (J: the residuals' Jacobian in the fit's
// normalised coordinates, plus the prior's curvature) is the covariance of the
// estimates; two parameters whose correlation is near +-1 trade off against each
// other: any value of one fits as well, given the matching value of the other.
#include <functional>
#include <string>
#include <vector>

namespace tpsim {

struct ConfoundedPair {
  std::size_t a = 0, b = 0;  // indices into the fitted parameters
  double correlation = 0;
};

using Residuals = std::function<std::vector<double>(const std::vector<double>& x)>;

// Central differences of `residuals` around `x` (each coordinate in [0, 1], stepped by
// `step`, one-sided at a bound); pairs with |correlation| >= `threshold`, most confounded first.
std::vector<ConfoundedPair> confounded_pairs(const Residuals& residuals, const std::vector<double>& x, double prior,
                                             double threshold = 0.9, double step = 0.01);

}  // namespace tpsim
