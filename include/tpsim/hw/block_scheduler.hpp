#pragma once
// One GPU's SMs and its hardware block scheduler. Kernels become resident in
// launch order; whenever resources free up, blocks of resident kernels are placed
// (earliest kernel first, breadth-first over SMs) wherever threads, registers,
// shared memory and block slots all fit. Waves are not a formula: a kernel with
// more blocks than free SMs simply waits for blocks to finish, and a kernel on
// another stream takes the SMs a partial wave leaves idle.
//
// Blocks of one kernel placed at the same instant share one completion event
// (they have the same duration), so a 132-block wave costs one event, not 132.
// Blocks that draw memory stream from the GPU's HBM pool: their duration is
// re-timed whenever what they share it with changes.
// A kernel that has already looked at every SM only looks again at the SMs freed
// since (no other SM can have gained room), so dispatch costs O(freed SMs).
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <deque>
#include <vector>

#include "tpsim/core/simulator.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/hw/hbm_pool.hpp"

namespace tpsim {

struct KernelRequest {
  BlockResources block;
  std::int64_t blocks = 0;
  bool draws_memory = false;  // streams from HBM: `block_work`, else `block_time`
  // Held kernels (NCCL channels, barriers) keep their blocks until release().
  bool held = false;
  // At most this many blocks resident at once (0: as many as fit): a clustered kernel's CTAs
  // must share a GPC, so fewer run than there are free SMs.
  std::int64_t max_resident_blocks = 0;
  // What blocks placed together do: asked once per placement (a GEMM's first blocks pay its ramp,
  // every placement of a streaming kernel's blocks its start-up).
  std::function<Tick()> block_time;       // kernels that draw no memory: their duration
  std::function<BlockWork()> block_work;  // memory-drawing kernels: prologue, math, bytes
  // Memory-drawing kernels whose blocks differ in work (a causal attention's query tiles): set
  // instead of block_work, it is asked per block by its index in launch order (the order the
  // hardware hands blocks out), and every block is placed alone.
  std::function<BlockWork(std::int64_t block)> block_work_at;
  std::function<void()> on_first_block;  // first block placed
  std::function<void()> on_resident;     // held: every block placed
  std::function<void()> on_complete;     // last block finished (or released)
};

class BlockScheduler {
 public:
  using KernelId = int;

  // `hbm_bytes_per_ps`: what memory-drawing blocks share (infinite: no limit).
  BlockScheduler(Simulator& sim, const SmSpec& spec, double hbm_bytes_per_ps = std::numeric_limits<double>::infinity());

  // The id is valid until the kernel completes; then it may be reused.
  KernelId launch(KernelRequest req);
  void release(KernelId id);  // for held kernels, once all blocks are resident

  // The HBM left to the SMs changed (link traffic reads and writes it too).
  void set_hbm_capacity(double bytes_per_ps) { hbm_.set_capacity(bytes_per_ps); }
  // Work of blocks a held kernel already keeps resident (a persistent kernel's rounds):
  // it streams from the same HBM as every other block, re-timed with them.
  void stream_resident(int blocks, const BlockWork& work, HbmPool::Done done) { hbm_.add(blocks, work, std::move(done)); }
  int busy_sms() const { return busy_sms_; }
  int sm_count() const { return static_cast<int>(sms_.size()); }
  std::int64_t blocks_dispatched() const { return blocks_dispatched_; }
  // Called with (now, busy SMs) whenever the count changes.
  void set_busy_observer(std::function<void(Tick, int)> obs) { busy_observer_ = std::move(obs); }

 private:
  struct Sm {
    BlockResources used;
    int blocks = 0;
  };
  struct Kernel {
    KernelRequest req;
    std::int64_t undispatched = 0;
    std::int64_t running = 0;
    bool started = false;
    bool finished = false;
    bool scanned = false;  // has looked at every SM since it became resident
    int per_sm = 1;        // most blocks one empty SM can hold
    std::vector<int> held_sms;
  };
  struct Placement {
    KernelId kernel;
    int group;  // index into groups_: the SMs these blocks landed on
  };

  bool fits(const Sm& sm, const BlockResources& b) const;
  void occupy(int sm, const BlockResources& b, int delta);
  void dispatch();
  void place_blocks(Kernel& k, KernelId id, const std::vector<int>& candidates, std::vector<Placement>& out);
  void mark_freed(int sm);
  int new_group();
  void run_group(KernelId id, int group);  // start the blocks of a placement
  void finish_group(KernelId id, int group);
  void complete(KernelId id);
  void notify_busy();

  Simulator& sim_;
  HbmPool hbm_;
  BlockResources capacity_;
  std::vector<Sm> sms_;
  std::deque<Kernel> kernels_;
  std::vector<KernelId> free_kernels_;  // finished kernels' slots, reused so memory stays flat  // deque: callbacks may launch while a Kernel& is held
  std::vector<KernelId> resident_;  // launch order, unfinished dispatch
  std::vector<std::vector<int>> groups_;  // pooled SM lists of blocks placed together
  std::vector<std::int64_t> group_block_;  // per group: its block's index, for kernels with block_work_at
  std::vector<int> free_groups_;
  std::vector<Placement> placements_;
  std::vector<int> all_sms_;
  std::vector<int> freed_;       // SMs that gained room since the last dispatch
  std::vector<char> is_freed_;
  int busy_sms_ = 0;
  std::int64_t blocks_dispatched_ = 0;
  bool dispatching_ = false;
  bool redispatch_ = false;
  std::function<void(Tick, int)> busy_observer_;
};

}  // namespace tpsim
