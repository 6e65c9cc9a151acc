#include "tpsim/core/simulator.hpp"

#include <algorithm>

namespace tpsim {

std::uint32_t Simulator::take_slot(Callback cb) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot].cb = std::move(cb);
  return slot;
}

void Simulator::free_slot(std::uint32_t slot) {
  slots_[slot].cb = nullptr;
  ++slots_[slot].generation;
  free_slots_.push_back(slot);
}

EventHandle Simulator::schedule_at(Tick t, Callback cb) {
  const std::uint32_t slot = take_slot(std::move(cb));
  const std::uint32_t gen = slots_[slot].generation;
  heap_.push_back(Entry{std::max(t, now_), next_seq_++, slot, gen});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
  return EventHandle(slot, gen);
}

bool Simulator::pending(const EventHandle& h) const {
  return h.valid() && h.slot_ < slots_.size() && slots_[h.slot_].generation == h.generation_;
}

bool Simulator::cancel(EventHandle& h) {
  if (!pending(h)) return false;
  free_slot(h.slot_);
  h = EventHandle();
  return true;
}

std::uint64_t Simulator::run() {
  const std::uint64_t before = fired_;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Entry e = heap_.back();
    heap_.pop_back();
    if (slots_[e.slot].generation != e.generation) continue;  // cancelled
    now_ = e.time;
    Callback cb = std::move(slots_[e.slot].cb);
    free_slot(e.slot);
    ++fired_;
    cb();
  }
  return fired_ - before;
}

}  // namespace tpsim
