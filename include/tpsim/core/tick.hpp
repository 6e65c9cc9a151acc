#pragma once
// Simulated time: a signed 64-bit count of picoseconds. Rates are converted to
// per-picosecond units once, at load time, so the event loop never sees seconds.
#include <cmath>
#include <cstdint>
#include <limits>

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
inline Tick duration_for(double amount, double rate_per_ps) {
  if (amount <= 0.0) return 0;
  return static_cast<Tick>(std::ceil(amount / rate_per_ps));
}

}  // namespace tpsim
