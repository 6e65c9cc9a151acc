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
#include <cstdint>
#include <functional>
#include <string>
#include <deque>
#include <vector>

#include "tpsim/core/simulator.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

struct KernelRequest {
  BlockResources block;
  std::int64_t blocks = 0;
  bool draws_memory = false;  // shares HBM bandwidth with other memory-drawing blocks
  // Held kernels (NCCL channels, barriers) keep their blocks until release().
  bool held = false;
  // Duration of blocks placed together, given the memory-drawing blocks running then.
  std::function<Tick(int memory_blocks)> block_time;
  std::function<void()> on_first_block;  // first block placed
  std::function<void()> on_resident;     // held: every block placed
  std::function<void()> on_complete;     // last block finished (or released)
};

class BlockScheduler {
 public:
  using KernelId = int;

  BlockScheduler(Simulator& sim, const SmSpec& spec);

  KernelId launch(KernelRequest req);
  void release(KernelId id);  // for held kernels, once all blocks are resident

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
    std::vector<int> held_sms;
  };
  struct Placement {
    KernelId kernel;
    std::vector<int> sms;
  };

  bool fits(const Sm& sm, const BlockResources& b) const;
  void occupy(int sm, const BlockResources& b, int delta);
  void dispatch();
  void place_blocks(Kernel& k, KernelId id, std::vector<Placement>& out);
  void finish_group(KernelId id, const std::vector<int>& sms);
  void complete(KernelId id);
  void notify_busy();

  Simulator& sim_;
  BlockResources capacity_;
  std::vector<Sm> sms_;
  std::deque<Kernel> kernels_;  // deque: callbacks may launch while a Kernel& is held
  std::vector<KernelId> resident_;  // launch order, unfinished dispatch
  int busy_sms_ = 0;
  int memory_blocks_ = 0;
  std::int64_t blocks_dispatched_ = 0;
  bool dispatching_ = false;
  bool redispatch_ = false;
  std::function<void(Tick, int)> busy_observer_;
};

}  // namespace tpsim
