#pragma once
// Discrete-event loop. Events fire in (time, insertion sequence) order, so the
// same inputs always give the same run. Cancellation is lazy and O(1): a handle
// names a slot and its generation; cancelling bumps the generation and the stale
// heap entry is skipped when popped. No global state: make as many as you like.
#include <cstdint>
#include <functional>
#include <vector>

#include "tpsim/core/tick.hpp"

namespace tpsim {

class EventHandle {
 public:
  EventHandle() = default;
  bool valid() const { return slot_ != kNone; }

 private:
  friend class Simulator;
  static constexpr std::uint32_t kNone = 0xffffffffu;
  EventHandle(std::uint32_t slot, std::uint32_t gen) : slot_(slot), generation_(gen) {}
  std::uint32_t slot_ = kNone;
  std::uint32_t generation_ = 0;
};

class Simulator {
 public:
  using Callback = std::function<void()>;

  // Bounds that keep a runaway model from exhausting memory or never ending
  // (SimulationLimit): events fired in one run, and events pending at once.
  static constexpr std::uint64_t kMaxEventsFired = 500'000'000;
  static constexpr std::size_t kMaxEventsPending = 50'000'000;

  Tick now() const { return now_; }
  // Schedules `cb` at absolute time `t` (clamped to now: the past is gone).
  EventHandle schedule_at(Tick t, Callback cb);
  // Past the end of the 64-bit clock: SimulationLimit, never a wrapped time.
  EventHandle schedule_after(Tick delay, Callback cb) {
    if (delay > kTickMax - now_) throw SimulationLimit("simulated time would pass the end of the 64-bit picosecond clock (about 106 days)");
    return schedule_at(now_ + delay, std::move(cb));
  }
  // Returns false when the event already fired or was cancelled.
  bool cancel(EventHandle& h);
  bool pending(const EventHandle& h) const;

  // Runs until no events remain. Returns the number of events fired.
  std::uint64_t run();
  std::uint64_t events_fired() const { return fired_; }

 private:
  struct Entry {
    Tick time;
    std::uint64_t seq;
    std::uint32_t slot;
    std::uint32_t generation;
  };
  static bool earlier(const Entry& a, const Entry& b) { return a.time != b.time ? a.time < b.time : a.seq < b.seq; }
  // A 4-ary min-heap: half the levels of a binary heap, children adjacent in memory.
  void heap_push(const Entry& e);
  Entry heap_pop();
  struct Slot {
    Callback cb;
    std::uint32_t generation = 0;
  };

  std::uint32_t take_slot(Callback cb);
  void free_slot(std::uint32_t slot);

  Tick now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t fired_ = 0;
  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
};

}  // namespace tpsim
