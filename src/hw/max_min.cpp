#include "tpsim/hw/max_min.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tpsim {

namespace {
// Progressive filling; use(i, j): what a payload byte of flow i takes of its j-th resource.
template <typename Use>
std::vector<double> fill(const std::vector<std::vector<int>>& paths, std::vector<double> capacity, const std::vector<double>& cap,
                         const Use& use) {
  std::vector<double>& cap_left = capacity;
  std::vector<double> users(cap_left.size(), 0.0);  // what the flows still rising take, per unit of rate
  for (std::size_t i = 0; i < paths.size(); ++i)
    for (std::size_t j = 0; j < paths[i].size(); ++j) users.at(static_cast<std::size_t>(paths[i][j])) += use(i, j);
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
      for (std::size_t j = 0; j < paths[i].size(); ++j) {
        const auto k = static_cast<std::size_t>(paths[i][j]);
        cap_left[k] -= level * use(i, j);
        users[k] -= use(i, j);
        if (users[k] < 1e-9) users[k] = 0;  // every flow on it has its rate
      }
    }
    open.swap(still_open);
  }
  return rate;
}
}  // namespace

std::vector<double> max_min_rates(const std::vector<std::vector<int>>& paths, std::vector<double> capacity,
                                  const std::vector<double>& cap, const std::vector<double>& weight) {
  if (cap.size() != paths.size() || (!weight.empty() && weight.size() != paths.size()))
    throw std::logic_error("max_min_rates: one cap (and weight) per flow");
  return fill(paths, std::move(capacity), cap,
              [&](std::size_t i, std::size_t) { return weight.empty() ? 1.0 : weight[i]; });
}

std::vector<double> max_min_rates_on_wire(const std::vector<std::vector<int>>& paths, std::vector<double> capacity,
                                          const std::vector<double>& cap, const std::vector<double>& use) {
  if (cap.size() != paths.size()) throw std::logic_error("max_min_rates_on_wire: one cap per flow");
  std::vector<std::size_t> first(paths.size());  // where flow i's uses start
  std::size_t n = 0;
  for (std::size_t i = 0; i < paths.size(); ++i) first[i] = n, n += paths[i].size();
  if (use.size() != n) throw std::logic_error("max_min_rates_on_wire: one use per resource of each flow's path");
  return fill(paths, std::move(capacity), cap, [&](std::size_t i, std::size_t j) { return use[first[i] + j]; });
}

}  // namespace tpsim
