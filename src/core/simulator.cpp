#include "tpsim/core/simulator.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tpsim/core/invariant.hpp"

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

void Simulator::heap_push(const Entry& e) {
  std::size_t i = heap_.size();
  heap_.push_back(e);
  while (i > 0) {
    const std::size_t parent = (i - 1) / 4;
    if (!earlier(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

Simulator::Entry Simulator::heap_pop() {
  const Entry top = heap_.front();
  const Entry last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n == 0) return top;
  std::size_t i = 0;
  while (true) {
    const std::size_t first = 4 * i + 1;
    if (first >= n) break;
    std::size_t best = first;
    const std::size_t end = std::min(first + 4, n);
    for (std::size_t c = first + 1; c < end; ++c)
      if (earlier(heap_[c], heap_[best])) best = c;
    if (!earlier(heap_[best], last)) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = last;
  return top;
}

EventHandle Simulator::schedule_at(Tick t, Callback cb) {
  if (heap_.size() >= kMaxEventsPending)
    throw SimulationLimit(fmt::format("more than {} events pending at once: the model is too large to simulate", kMaxEventsPending));
  const std::uint32_t slot = take_slot(std::move(cb));
  const std::uint32_t gen = slots_[slot].generation;
  heap_push(Entry{std::max(t, now_), next_seq_++, slot, gen});
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
    const Entry e = heap_pop();
    if (slots_[e.slot].generation != e.generation) continue;  // cancelled
    now_ = e.time;
    Callback cb = std::move(slots_[e.slot].cb);
    free_slot(e.slot);
    if (++fired_ > kMaxEventsFired)
      throw SimulationLimit(fmt::format("more than {} events: the simulation was stopped", kMaxEventsFired));
    cb();
  }
  return fired_ - before;
}

}  // namespace tpsim
