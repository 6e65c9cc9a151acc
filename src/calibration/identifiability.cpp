#include "tpsim/calibration/identifiability.hpp"

#include <algorithm>
#include <cmath>

#include <Eigen/Dense>

namespace tpsim {

std::vector<ConfoundedPair> confounded_pairs(const Residuals& residuals, const std::vector<double>& x, double prior,
                                             double threshold, double step) {
  const std::size_t n = x.size();
  if (n < 2) return {};
  std::vector<std::vector<double>> jacobian(n);  // per parameter: d residual_i / d x_j
  for (std::size_t j = 0; j < n; ++j) {
    std::vector<double> up = x, down = x;
    up[j] = std::min(1.0, x[j] + step);
    down[j] = std::max(0.0, x[j] - step);
    const auto ru = residuals(up), rd = residuals(down);
    jacobian[j].resize(ru.size());
    for (std::size_t i = 0; i < ru.size(); ++i) jacobian[j][i] = (ru[i] - rd[i]) / (up[j] - down[j]);
  }
  // Curvature of the objective: J^T J, plus the prior's (it keeps the matrix invertible).
  const auto size = static_cast<Eigen::Index>(n);
  Eigen::MatrixXd curvature = prior * Eigen::MatrixXd::Identity(size, size);
  for (Eigen::Index a = 0; a < size; ++a)
    for (Eigen::Index b = 0; b < size; ++b)
      for (std::size_t i = 0; i < jacobian[static_cast<std::size_t>(a)].size(); ++i)
        curvature(a, b) += jacobian[static_cast<std::size_t>(a)][i] * jacobian[static_cast<std::size_t>(b)][i];
  const Eigen::LDLT<Eigen::MatrixXd> factor(curvature);  // symmetric positive (semi)definite
  if (factor.info() != Eigen::Success) return {};
  const Eigen::MatrixXd covariance = factor.solve(Eigen::MatrixXd::Identity(size, size));
  std::vector<ConfoundedPair> out;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b) {
      const auto ia = static_cast<Eigen::Index>(a), ib = static_cast<Eigen::Index>(b);
      const double c = covariance(ia, ib) / std::sqrt(covariance(ia, ia) * covariance(ib, ib));
      if (std::isfinite(c) && std::fabs(c) >= threshold) out.push_back({a, b, c});
    }
  std::sort(out.begin(), out.end(), [](const ConfoundedPair& p, const ConfoundedPair& q) {
    return std::fabs(p.correlation) != std::fabs(q.correlation) ? std::fabs(p.correlation) > std::fabs(q.correlation)
                                                                : std::tie(p.a, p.b) < std::tie(q.a, q.b);
  });
  return out;
}

}  // namespace tpsim
