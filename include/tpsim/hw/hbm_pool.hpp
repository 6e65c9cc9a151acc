#pragma once
// One GPU's HBM bandwidth as a shared resource, re-timed like the fabric: the
// blocks streaming from it share what the link traffic leaves, max-min fair per
// block, and every time the set of streams or the capacity changes, each one's
// remaining work is re-timed. A block that joins later slows the ones already
// running; one that leaves speeds them up. What is drawn never exceeds capacity.
//
// A block's work is pipelined (loads for stage i+1 overlap the math of stage i):
// alone it takes its prologue plus max(compute, bytes / its SM's cap), and it asks
// for its bytes spread over that time. Granted less, its bytes set the pace (the
// prologue, which is loads too, is then hidden in them); it never goes faster than
// it would alone. One event per group of blocks: no separate prologue event.
#include <cstdint>
#include <functional>
#include <vector>

#include "tpsim/core/simulator.hpp"
#include "tpsim/core/tick.hpp"

namespace tpsim {

struct BlockWork {
  Tick delay = 0;            // before it touches HBM: a GEMM's ramp (first blocks), a streaming kernel's start-up
  Tick fixed = 0;            // prologue and epilogue: pipeline fill, loads too
  Tick compute = 0;          // math time; 0 for a pure streaming kernel
  double bytes = 0;          // HBM bytes one block reads and writes
  double max_bytes_per_ps = 0;  // what one block can draw at most (its SM's load capacity)
  // Duration at a fixed byte rate, its prologue apart from its bytes.
  Tick time_at(double bytes_per_ps) const;
  // Duration when granted this byte rate by the pool below: no faster than alone (at its SM's
  // cap), and where the grant is less, its bytes set the pace with the prologue hidden in them
  // (the estimate a tile heuristic makes of blocks sharing the HBM).
  Tick shared_time(double bytes_per_ps) const;
};

class HbmPool {
 public:
  using Done = std::function<void()>;

  HbmPool(Simulator& sim, double capacity_bytes_per_ps);

  // `blocks` identical blocks start streaming now; `done` fires when they finish.
  void add(int blocks, const BlockWork& work, Done done);
  // The capacity left to blocks changed (link traffic also reads and writes HBM).
  void set_capacity(double bytes_per_ps);

  double drawn() const;  // bytes/ps the streams draw now

 private:
  struct Stream {
    int blocks = 0;
    BlockWork work;
    double alone = 0;     // ps it takes with all the bandwidth it can use
    double demand = 0;    // per block, bytes/ps: its bytes over that time
    double rate = 0;      // per block, bytes/ps granted
    double progress = 0;  // fraction of the streaming work done
    double speed = 0;     // fraction per ps at the granted rate
    Tick since = 0;
    EventHandle finish;
    Done done;
  };

  void retime();
  // Sets a stream's speed from its granted rate; re-schedules its end if that changed.
  void set_speed(std::size_t slot);
  void complete(std::size_t slot);

  Simulator& sim_;
  double capacity_;
  std::vector<Stream> slots_;
  std::vector<std::size_t> free_;
  std::vector<std::size_t> active_;  // in the order they joined (deterministic)
  std::vector<std::size_t> order_;   // scratch: active_ by demand
  double demand_ = 0;       // what every stream would draw at its own pace
  bool saturated_ = false;  // demand exceeded capacity at the last re-timing: rates are shares
};

}  // namespace tpsim
