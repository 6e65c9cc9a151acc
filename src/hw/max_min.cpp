#include "tpsim/hw/max_min.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tpsim {

std::vector<double> max_min_rates(const std::vector<std::vector<int>>& paths, std::vector<double> capacity,
                                  const std::vector<double>& cap, const std::vector<double>& weight) {
  if (cap.size() != paths.size() || (!weight.empty() && weight.size() != paths.size()))
    throw std::logic_error("max_min_rates: one cap (and weight) per flow");
  const auto w = [&](std::size_t i) { return weight.empty() ? 1.0 : weight[i]; };
  std::vector<double>& cap_left = capacity;
  std::vector<double> users(cap_left.size(), 0.0);  // flows still rising, weighted
  for (std::size_t i = 0; i < paths.size(); ++i)
    for (int r : paths[i]) users.at(static_cast<std::size_t>(r)) += w(i);
  std::vector<double> rate(paths.size(), 0.0);
  std::vector<std::size_t> open(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) open[i] = i;
  std::vector<char> saturated(cap_left.size());
  while (!open.empty()) {
    // The lowest fair share over resources still in use, or the lowest own cap.
    double level = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < cap_left.size(); ++r)
      if (users[r] > 0) level = std::min(level, cap_left[r] / users[r]);
    for (std::size_t i : open) level = std::min(level, cap[i]);
    const double tol = level * 1e-12;
    for (std::size_t r = 0; r < cap_left.size(); ++r) saturated[r] = users[r] > 0 && cap_left[r] / users[r] <= level + tol;
    std::vector<std::size_t> still_open;
    for (std::size_t i : open) {
      const bool bottlenecked = cap[i] <= level + tol || std::any_of(paths[i].begin(), paths[i].end(), [&](int r) {
                                  return saturated[static_cast<std::size_t>(r)] != 0;
                                });
      if (!bottlenecked) {
        still_open.push_back(i);
        continue;
      }
      rate[i] = level;
      for (int r : paths[i]) {
        const auto k = static_cast<std::size_t>(r);
        cap_left[k] -= level * w(i);
        users[k] -= w(i);
        if (users[k] < 1e-9) users[k] = 0;  // every flow on it has its rate
      }
    }
    open.swap(still_open);
  }
  return rate;
}

}  // namespace tpsim
