#pragma once
// The median of measured samples (repeats of one op, kernels of one shape).
#include <algorithm>
#include <stdexcept>
#include <vector>

namespace tpsim {

inline double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("median of no samples");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace tpsim
