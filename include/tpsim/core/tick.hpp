#pragma once
// Simulated time: a signed 64-bit count of picoseconds. Rates are converted to
// per-picosecond units once, at load time, so the event loop never sees seconds.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "tpsim/core/invariant.hpp"

namespace tpsim {

using Tick = std::int64_t;

constexpr Tick kPicosPerNs = 1'000;
constexpr Tick kPicosPerUs = 1'000'000;
constexpr Tick kTickMax = std::numeric_limits<Tick>::max();

constexpr double to_us(Tick t) { return static_cast<double>(t) / static_cast<double>(kPicosPerUs); }
inline Tick ticks_from_us(double us) { return static_cast<Tick>(std::llround(us * kPicosPerUs)); }
inline Tick ticks_from_ns(double ns) { return static_cast<Tick>(std::llround(ns * kPicosPerNs)); }

// Time to move `amount` at `rate_per_ps` (bytes/ps or FLOP/ps), rounded up so a
// transfer never finishes before its last byte could have arrived.
// A duration past the int64 clock (or at no rate at all) stops the run: never a wrapped number.
inline Tick duration_for(double amount, double rate_per_ps) {
  if (amount <= 0.0) return 0;
  const double t = std::ceil(amount / rate_per_ps);
  if (!(t < 9.0e18))
    throw SimulationLimit("a duration does not fit simulated time (64-bit picoseconds, about 104 days): " + std::to_string(amount) +
                          " at " + std::to_string(rate_per_ps) + " per ps");
  return static_cast<Tick>(t);
}

}  // namespace tpsim
