#include "tpsim/hw/block_scheduler.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/core/invariant.hpp"

namespace tpsim {

BlockScheduler::BlockScheduler(Simulator& sim, const SmSpec& spec, double hbm_bytes_per_ps)
    : sim_(sim), hbm_(sim, hbm_bytes_per_ps), capacity_(spec.capacity), sms_(static_cast<std::size_t>(spec.count)),
      is_freed_(sms_.size(), 0) {
  for (int i = 0; i < spec.count; ++i) all_sms_.push_back(i);
}

void BlockScheduler::mark_freed(int sm) {
  if (is_freed_[static_cast<std::size_t>(sm)]) return;
  is_freed_[static_cast<std::size_t>(sm)] = 1;
  freed_.push_back(sm);
}

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
  const auto& c = capacity_;
  if (sm.used.threads > c.threads || sm.used.registers > c.registers || sm.used.shared_bytes > c.shared_bytes ||
      sm.used.blocks > c.blocks || sm.used.threads < 0 || sm.blocks < 0)
    throw InvariantViolation(fmt::format("SM {} oversubscribed or freed twice ({} threads, {} registers, {} B shared, {} blocks)",
                                         index, sm.used.threads, sm.used.registers, sm.used.shared_bytes, sm.blocks));
}

BlockScheduler::KernelId BlockScheduler::launch(KernelRequest req) {
  if (req.blocks <= 0) throw std::logic_error("kernel launched with no blocks");
  if (!fits(Sm{}, req.block)) throw std::logic_error("kernel block does not fit an empty SM");
  Kernel k;
  k.undispatched = req.blocks;
  const auto room = [](int cap, int need) { return need > 0 ? cap / need : 1 << 20; };
  k.per_sm = std::min({room(capacity_.threads, req.block.threads), room(capacity_.registers, req.block.registers),
                       room(capacity_.shared_bytes, req.block.shared_bytes), room(capacity_.blocks, req.block.blocks)});
  k.req = std::move(req);
  KernelId id;
  if (!free_kernels_.empty()) {
    id = free_kernels_.back();
    free_kernels_.pop_back();
    kernels_[static_cast<std::size_t>(id)] = std::move(k);
  } else {
    id = static_cast<KernelId>(kernels_.size());
    kernels_.push_back(std::move(k));
  }
  resident_.push_back(id);
  dispatch();
  return id;
}

int BlockScheduler::new_group() {
  if (free_groups_.empty()) {
    groups_.emplace_back();
    group_block_.push_back(0);
    return static_cast<int>(groups_.size()) - 1;
  }
  const int g = free_groups_.back();
  free_groups_.pop_back();
  groups_[static_cast<std::size_t>(g)].clear();
  return g;
}

void BlockScheduler::place_blocks(Kernel& k, KernelId id, const std::vector<int>& candidates, std::vector<Placement>& out) {
  int group = -1;
  // Breadth-first: one block per SM per pass, as the hardware spreads a grid.
  // When one SM holds only one such block, a single pass finds every place.
  bool placed = true;
  std::int64_t room = k.req.max_resident_blocks > 0 ? k.req.max_resident_blocks - k.running : k.undispatched;
  for (int pass = 0; k.undispatched > 0 && room > 0 && placed && pass < k.per_sm; ++pass) {
    placed = false;
    for (std::size_t c = 0; c < candidates.size() && k.undispatched > 0 && room > 0; ++c) {
      const int i = candidates[c];
      if (!fits(sms_[static_cast<std::size_t>(i)], k.req.block)) continue;
      occupy(i, k.req.block, +1);
      if (k.req.block_work_at) {  // blocks of different work: each its own group, in launch order
        const int alone = new_group();
        groups_[static_cast<std::size_t>(alone)].push_back(i);
        group_block_[static_cast<std::size_t>(alone)] = k.req.blocks - k.undispatched;
        out.push_back(Placement{id, alone});
      } else {
        if (group < 0) group = new_group();
        groups_[static_cast<std::size_t>(group)].push_back(i);
      }
      --k.undispatched;
      --room;
      placed = true;
    }
  }
  if (group >= 0) out.push_back(Placement{id, group});
}

void BlockScheduler::dispatch() {
  if (dispatching_) {
    redispatch_ = true;
    return;
  }
  dispatching_ = true;
  do {
    redispatch_ = false;
    std::vector<Placement>& placements = placements_;
    placements.clear();
    for (KernelId id : resident_) {
      Kernel& k = kernels_[static_cast<std::size_t>(id)];
      place_blocks(k, id, k.scanned ? freed_ : all_sms_, placements);
      // A kernel held back by its resident-block limit has not used every SM it could: it looks
      // at all of them again next time.
      k.scanned = k.req.max_resident_blocks == 0;
    }
    for (int sm : freed_) is_freed_[static_cast<std::size_t>(sm)] = 0;
    freed_.clear();
    resident_.erase(std::remove_if(resident_.begin(), resident_.end(),
                                   [&](KernelId id) { return kernels_[static_cast<std::size_t>(id)].undispatched == 0; }),
                    resident_.end());
    if (placements.empty()) break;
    notify_busy();
    for (std::size_t pi = 0; pi < placements.size(); ++pi) {
      const Placement p = placements[pi];  // callbacks below may relaunch and reuse placements_
      Kernel& k = kernels_[static_cast<std::size_t>(p.kernel)];
      const auto& sms = groups_[static_cast<std::size_t>(p.group)];
      const auto n = static_cast<std::int64_t>(sms.size());
      k.running += n;
      blocks_dispatched_ += n;
      if (!k.started) {
        k.started = true;
        if (k.req.on_first_block) k.req.on_first_block();
      }
      if (k.req.held) {
        k.held_sms.insert(k.held_sms.end(), sms.begin(), sms.end());
        free_groups_.push_back(p.group);
        if (k.undispatched == 0 && k.req.on_resident) k.req.on_resident();
        continue;
      }
      run_group(p.kernel, p.group);
    }
  } while (redispatch_);
  dispatching_ = false;
}

void BlockScheduler::run_group(KernelId id, int group) {
  Kernel& k = kernels_[static_cast<std::size_t>(id)];
  if (!k.req.draws_memory) {
    sim_.schedule_after(k.req.block_time(), [this, id, group] { finish_group(id, group); });
    return;
  }
  const int n = static_cast<int>(groups_[static_cast<std::size_t>(group)].size());
  const BlockWork work = k.req.block_work_at ? k.req.block_work_at(group_block_[static_cast<std::size_t>(group)]) : k.req.block_work();
  const auto stream = [this, id, group, n, work] { hbm_.add(n, work, [this, id, group] { finish_group(id, group); }); };
  if (work.delay > 0) sim_.schedule_after(work.delay, stream);  // a ramp or start-up before bytes flow
  else stream();
}

void BlockScheduler::finish_group(KernelId id, int group) {
  Kernel& k = kernels_[static_cast<std::size_t>(id)];
  const auto& sms = groups_[static_cast<std::size_t>(group)];
  // The next wave: the earliest resident kernel gets first pick of freed SMs, so
  // when it has a block for each of them, dispatch would give it exactly these
  // SMs back. Re-arm the group instead of freeing and re-placing block by block.
  if (!resident_.empty() && resident_.front() == id && k.undispatched >= static_cast<std::int64_t>(sms.size())) {
    const auto n = static_cast<std::int64_t>(sms.size());
    group_block_[static_cast<std::size_t>(group)] = k.req.blocks - k.undispatched;  // the next block in launch order
    k.undispatched -= n;
    blocks_dispatched_ += n;
    if (k.undispatched == 0) resident_.erase(resident_.begin());
    run_group(id, group);
    return;
  }
  for (int sm : sms) occupy(sm, k.req.block, -1), mark_freed(sm);
  const auto n = static_cast<std::int64_t>(sms.size());
  free_groups_.push_back(group);
  k.running -= n;
  notify_busy();
  if (k.undispatched == 0 && k.running == 0) complete(id);
  dispatch();
}

void BlockScheduler::release(KernelId id) {
  Kernel& k = kernels_[static_cast<std::size_t>(id)];
  if (!k.req.held || k.undispatched != 0) throw std::logic_error("release of a kernel that is not held resident");
  for (int sm : k.held_sms) occupy(sm, k.req.block, -1), mark_freed(sm);
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
  auto done = std::move(k.req.on_complete);
  k.req = KernelRequest{};  // drop the captured state now
  k.held_sms = {};
  free_kernels_.push_back(id);
  if (done) done();
}

void BlockScheduler::notify_busy() {
  if (busy_observer_) busy_observer_(sim_.now(), busy_sms_);
}

}  // namespace tpsim
