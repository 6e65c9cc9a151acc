#pragma once
// Whole tiles, waves and blocks: integer division rounded up, for positive sizes.
#include <cstdint>

namespace tpsim {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

}  // namespace tpsim
