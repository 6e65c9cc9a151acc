#include "tpsim/hw/block_scheduler.hpp"

#include <algorithm>
#include <stdexcept>

namespace tpsim {

BlockScheduler::BlockScheduler(Simulator& sim, const SmSpec& spec)
    : sim_(sim), capacity_(spec.capacity), sms_(static_cast<std::size_t>(spec.count)) {}

bool BlockScheduler::fits(const Sm& sm, const BlockResources& b) const {
  return sm.used.threads + b.threads <= capacity_.threads && sm.used.registers + b.registers <= capacity_.registers &&
         sm.used.shared_bytes + b.shared_bytes <= capacity_.shared_bytes &&
         sm.used.blocks + b.blocks <= capacity_.blocks;
}

void BlockScheduler::occupy(int index, const BlockResources& b, int delta) {
  Sm& sm = sms_[static_cast<std::size_t>(index)];
  const bool was_busy = sm.blocks > 0;
  sm.used.threads += delta * b.threads;
  sm.used.registers += delta * b.registers;
  sm.used.shared_bytes += delta * b.shared_bytes;
  sm.used.blocks += delta * b.blocks;
  sm.blocks += delta;
  busy_sms_ += (sm.blocks > 0) - was_busy;
}

BlockScheduler::KernelId BlockScheduler::launch(KernelRequest req) {
  if (req.blocks <= 0) throw std::logic_error("kernel launched with no blocks");
  if (!fits(Sm{}, req.block)) throw std::logic_error("kernel block does not fit an empty SM");
  const KernelId id = static_cast<KernelId>(kernels_.size());
  Kernel k;
  k.undispatched = req.blocks;
  k.req = std::move(req);
  kernels_.push_back(std::move(k));
  resident_.push_back(id);
  dispatch();
  return id;
}

void BlockScheduler::place_blocks(Kernel& k, KernelId id, std::vector<Placement>& out) {
  Placement p{id, {}};
  // Breadth-first: one block per SM per pass, as the hardware spreads a grid.
  bool placed = true;
  while (k.undispatched > 0 && placed) {
    placed = false;
    for (int i = 0; i < sm_count() && k.undispatched > 0; ++i) {
      if (!fits(sms_[static_cast<std::size_t>(i)], k.req.block)) continue;
      occupy(i, k.req.block, +1);
      p.sms.push_back(i);
      --k.undispatched;
      placed = true;
    }
  }
  if (!p.sms.empty()) out.push_back(std::move(p));
}

void BlockScheduler::dispatch() {
  if (dispatching_) {
    redispatch_ = true;
    return;
  }
  dispatching_ = true;
  do {
    redispatch_ = false;
    std::vector<Placement> placements;
    for (KernelId id : resident_) place_blocks(kernels_[static_cast<std::size_t>(id)], id, placements);
    resident_.erase(std::remove_if(resident_.begin(), resident_.end(),
                                   [&](KernelId id) { return kernels_[static_cast<std::size_t>(id)].undispatched == 0; }),
                    resident_.end());
    if (placements.empty()) break;
    // Durations are set once everything placed now is counted as drawing memory.
    for (const Placement& p : placements) {
      const Kernel& k = kernels_[static_cast<std::size_t>(p.kernel)];
      if (k.req.draws_memory) memory_blocks_ += static_cast<int>(p.sms.size());
    }
    notify_busy();
    for (Placement& p : placements) {
      Kernel& k = kernels_[static_cast<std::size_t>(p.kernel)];
      const auto n = static_cast<std::int64_t>(p.sms.size());
      k.running += n;
      blocks_dispatched_ += n;
      if (!k.started) {
        k.started = true;
        if (k.req.on_first_block) k.req.on_first_block();
      }
      if (k.req.held) {
        k.held_sms.insert(k.held_sms.end(), p.sms.begin(), p.sms.end());
        if (k.undispatched == 0 && k.req.on_resident) k.req.on_resident();
        continue;
      }
      const Tick d = k.req.block_time(memory_blocks_);
      const KernelId id = p.kernel;
      sim_.schedule_after(d, [this, id, sms = std::move(p.sms)] { finish_group(id, sms); });
    }
  } while (redispatch_);
  dispatching_ = false;
}

void BlockScheduler::finish_group(KernelId id, const std::vector<int>& sms) {
  Kernel& k = kernels_[static_cast<std::size_t>(id)];
  for (int sm : sms) occupy(sm, k.req.block, -1);
  const auto n = static_cast<std::int64_t>(sms.size());
  k.running -= n;
  if (k.req.draws_memory) memory_blocks_ -= static_cast<int>(n);
  notify_busy();
  if (k.undispatched == 0 && k.running == 0) complete(id);
  dispatch();
}

void BlockScheduler::release(KernelId id) {
  Kernel& k = kernels_[static_cast<std::size_t>(id)];
  if (!k.req.held || k.undispatched != 0) throw std::logic_error("release of a kernel that is not held resident");
  for (int sm : k.held_sms) occupy(sm, k.req.block, -1);
  if (k.req.draws_memory) memory_blocks_ -= static_cast<int>(k.held_sms.size());
  k.running = 0;
  k.held_sms.clear();
  notify_busy();
  complete(id);
  dispatch();
}

void BlockScheduler::complete(KernelId id) {
  Kernel& k = kernels_[static_cast<std::size_t>(id)];
  if (k.finished) return;
  k.finished = true;
  if (k.req.on_complete) k.req.on_complete();
}

void BlockScheduler::notify_busy() {
  if (busy_observer_) busy_observer_(sim_.now(), busy_sms_);
}

}  // namespace tpsim
