#include "tpsim/cost/l2_writeback.hpp"

#include <algorithm>
#include <cmath>

namespace tpsim {

std::string_view l2_start_name(L2Start s) {
  switch (s) {
    case L2Start::back_to_back: return "back_to_back";
    case L2Start::clean: return "clean";
    case L2Start::dirty: return "dirty";
  }
  return "back_to_back";
}

std::optional<L2Start> parse_l2_start(std::string_view s) {
  for (L2Start v : {L2Start::back_to_back, L2Start::clean, L2Start::dirty})
    if (s == l2_start_name(v)) return v;
  return std::nullopt;
}

double l2_dirty_at_start(L2Start start, const MemorySpec& memory) {
  return start == L2Start::dirty ? memory.l2_dirty_bytes : 0.0;
}

double l2_dirty_left(double dirty, double capacity, double touched) {
  if (capacity <= 0) return dirty;
  return dirty * std::exp(-std::max(0.0, touched) / capacity);
}

double l2_dirty_after(double dirty, const MemorySpec& memory, double touched, double written) {
  return std::min(memory.l2_dirty_bytes, l2_dirty_left(dirty, memory.l2_capacity_bytes, touched) + std::max(0.0, written));
}

double l2_extra_bytes(double found_dirty, const L2Reference& ref, const MemorySpec& memory, double touched, double written) {
  if (memory.l2_dirty_bytes <= 0 || memory.l2_capacity_bytes <= 0) return 0;
  // What it found where its parameters were measured: a flush's dirty lines, or (back to
  // back) what its previous call left dirty, its own output as far as the L2 keeps it.
  const double measured = ref.fitted_after_dirty_l2 ? memory.l2_dirty_bytes : std::min(std::max(0.0, written), memory.l2_dirty_bytes);
  const double evicted_share = 1.0 - l2_dirty_left(1.0, memory.l2_capacity_bytes, touched);
  return (found_dirty - measured) * evicted_share;
}

}  // namespace tpsim
