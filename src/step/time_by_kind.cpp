#include "tpsim/step/time_by_kind.hpp"

#include <cmath>

namespace tpsim {

Tick total(const TimeByKind& k) {
  Tick t = 0;
  for (const auto& [kind, ps] : k) t += ps;
  return t;
}

TimeByKind scaled_to(const TimeByKind& shares, Tick to) {
  TimeByKind out;
  if (to <= 0) return out;
  const Tick sum = total(shares);
  if (sum <= 0) return {{"other", to}};
  Tick given = 0;
  auto largest = shares.end();
  for (auto it = shares.begin(); it != shares.end(); ++it) {
    if (it->second <= 0) continue;
    const Tick part = static_cast<Tick>(std::llround(static_cast<double>(it->second) / static_cast<double>(sum) * static_cast<double>(to)));
    out[it->first] = part;
    given += part;
    if (largest == shares.end() || it->second > largest->second) largest = it;
  }
  out[largest->first] += to - given;
  return out;
}

TimeByKind& operator+=(TimeByKind& a, const TimeByKind& b) {
  for (const auto& [kind, ps] : b)
    if (ps > 0) a[kind] += ps;
  return a;
}

TimeByKind operator+(TimeByKind a, const TimeByKind& b) { return a += b; }

}  // namespace tpsim
