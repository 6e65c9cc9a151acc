#pragma once
// What the L2 a kernel finds changes in its HBM traffic. Kernel parameters are fitted to
// kernels launched back to back, each finding the dirty lines its previous call left (its
// own output, up to what the L2 keeps dirty) and writing them back as its misses evict them.
// After a benchmark's flush it finds something else: a clean L2 (a buffer read) leaves it
// nothing to write back, a dirty one (a buffer overwritten) the L2's dirty bytes, of which
// its misses evict as many as it brings in.
#include <optional>
#include <string_view>

#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

// "back_to_back", "clean", "dirty": a scenario's software.l2 and a measurement row's "l2".
std::string_view l2_start_name(L2Start s);
std::optional<L2Start> parse_l2_start(std::string_view s);

// The L2 a kernel class's parameters were fitted after: GEMMs' to calls back to back (each
// finding its previous call's output dirty), streaming kernels' start-ups to calls after a
// dirty L2 (h100_sxm_memory_bound.json's rows).
struct L2Reference {
  bool fitted_after_dirty_l2 = false;
};

// The dirty bytes a run's L2 holds at its start: a dirty flush's (memory.l2_dirty_bytes), a
// clean one's none; back to back is not a flush (no kernel's traffic changes).
double l2_dirty_at_start(L2Start start, const MemorySpec& memory);

// Each line a kernel brings in evicts one the replacement picks among all the L2's lines: a
// dirty one as often as dirty lines are left. So of `dirty` bytes, streaming `touched` bytes
// through an L2 of `capacity` leaves dirty * exp(-touched / capacity); the rest is written back.
double l2_dirty_left(double dirty, double capacity, double touched);

// What a kernel leaves dirty: what it did not evict of `dirty`, and what it wrote, as far as
// the L2 keeps dirty lines.
double l2_dirty_after(double dirty, const MemorySpec& memory, double touched, double written);

// The HBM bytes a kernel moves beyond (or, negative, short of) what its parameters describe
// when it finds `found_dirty` dirty bytes in the L2: `touched` is what it reads and writes
// from HBM, `written` what it writes.
double l2_extra_bytes(double found_dirty, const L2Reference& ref, const MemorySpec& memory, double touched, double written);

}  // namespace tpsim
