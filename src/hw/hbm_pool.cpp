#include "tpsim/hw/hbm_pool.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tpsim/core/invariant.hpp"

namespace tpsim {

Tick BlockWork::time_at(double bytes_per_ps) const {
  const double rate = std::min(bytes_per_ps, max_bytes_per_ps);
  return delay + fixed + std::max(compute, duration_for(bytes, rate));
}

Tick BlockWork::shared_time(double bytes_per_ps) const {
  const Tick alone = time_at(max_bytes_per_ps) - delay;
  return delay + std::max(alone, duration_for(bytes, std::min(bytes_per_ps, max_bytes_per_ps)));
}

HbmPool::HbmPool(Simulator& sim, double capacity_bytes_per_ps) : sim_(sim), capacity_(capacity_bytes_per_ps) {}

void HbmPool::add(int blocks, const BlockWork& work, Done done) {
  std::size_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = slots_.size();
    slots_.emplace_back();
  }
  Stream& s = slots_[slot];
  s = Stream{};
  s.blocks = blocks;
  s.work = work;
  s.work.delay = 0;  // the caller waits it out before adding
  // Alone it takes its prologue plus the slower of its math and its bytes at its SM's
  // cap; it asks for its bytes spread over that time (the prologue's loads included).
  s.alone = static_cast<double>(s.work.time_at(s.work.max_bytes_per_ps));
  s.demand = work.bytes > 0 && s.alone > 0 ? work.bytes / s.alone : 0.0;
  s.since = sim_.now();
  s.done = std::move(done);
  active_.push_back(slot);
  demand_ += s.demand * s.blocks;
  // While every stream runs at its own pace, a newcomer that fits changes no one else.
  if (!saturated_ && demand_ <= capacity_) {
    s.rate = s.demand;
    set_speed(slot);
    return;
  }
  retime();
}

void HbmPool::set_capacity(double bytes_per_ps) {
  if (bytes_per_ps == capacity_) return;
  capacity_ = bytes_per_ps;
  if (!saturated_ && demand_ <= capacity_) return;
  retime();
}

double HbmPool::drawn() const {
  double sum = 0;
  for (std::size_t slot : active_) sum += slots_[slot].blocks * slots_[slot].rate;
  return sum;
}

void HbmPool::retime() {
  demand_ = 0;
  for (std::size_t slot : active_) demand_ += slots_[slot].demand * slots_[slot].blocks;
  saturated_ = demand_ > capacity_;
  if (!saturated_) {
    for (std::size_t slot : active_) slots_[slot].rate = slots_[slot].demand;
  } else {
    // Max-min per block: water-fill the capacity over the demands, smallest first.
    order_ = active_;
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return slots_[a].demand < slots_[b].demand; });
    double left = capacity_, blocks_left = 0;
    for (std::size_t slot : order_) blocks_left += slots_[slot].blocks;
    for (std::size_t slot : order_) {
      Stream& s = slots_[slot];
      s.rate = std::min(s.demand, blocks_left > 0 ? left / blocks_left : 0.0);
      left -= s.rate * s.blocks;
      blocks_left -= s.blocks;
    }
  }
  if (drawn() > capacity_ * (1 + 1e-9))
    throw InvariantViolation(fmt::format("HBM draws {:.1f} GB/s of {:.1f}", drawn() * 1e3, capacity_ * 1e3));
  for (std::size_t slot : active_) set_speed(slot);
}

void HbmPool::set_speed(std::size_t slot) {
  Stream& s = slots_[slot];
  // Granted less than it asks, its bytes set the pace; otherwise its own time does.
  const double speed = s.alone <= 0 ? HUGE_VAL : s.work.bytes > 0 ? s.rate / s.work.bytes : 1.0 / s.alone;
  // Unchanged speed: its end is where it was (the common case while HBM is not saturated).
  if (speed == s.speed && sim_.pending(s.finish)) return;
  const Tick now = sim_.now();
  s.progress = std::min(1.0, s.progress + s.speed * static_cast<double>(now - s.since));
  s.since = now;
  s.speed = speed;
  sim_.cancel(s.finish);
  if (speed == HUGE_VAL || s.progress >= 1.0) {
    s.finish = sim_.schedule_at(now, [this, slot] { complete(slot); });
  } else if (const double left = std::ceil((1.0 - s.progress) / speed); left < static_cast<double>(kTickMax - now)) {
    s.finish = sim_.schedule_after(static_cast<Tick>(left), [this, slot] { complete(slot); });
  }  // (next to) no bandwidth: starved until link traffic leaves it some, and the pool is re-timed
}

void HbmPool::complete(std::size_t slot) {
  active_.erase(std::find(active_.begin(), active_.end(), slot));
  demand_ -= slots_[slot].demand * slots_[slot].blocks;
  Done done = std::move(slots_[slot].done);
  slots_[slot] = Stream{};
  free_.push_back(slot);
  // Below saturation everyone already runs at its own pace: a leaver frees nothing they could use.
  if (saturated_ && !active_.empty()) retime();
  if (active_.empty()) demand_ = 0, saturated_ = false;
  done();
}

}  // namespace tpsim
