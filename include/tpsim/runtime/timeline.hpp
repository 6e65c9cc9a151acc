#pragma once
// What happened when a DAG ran: per-op times and per-GPU activity samples.
// Both the simulator and the CUDA backend produce one of these.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tpsim/core/tick.hpp"

namespace tpsim {

struct OpTiming {
  Tick issued = -1;   // host finished enqueuing it
  Tick ready = -1;    // dependencies done (its turn on the stream)
  Tick launched = -1; // reached the GPU (kernels: after the device launch latency); start - launched is queueing
  Tick start = -1;    // first block on an SM / copy engine taken / event fired
  Tick end = -1;
  int engine = -1;    // copy engine index for copies
  bool stand_in = false;  // measured runs: an op the GPU did not run, held for its simulated time
  bool finished() const { return end >= 0; }
};

struct Sample {
  Tick time;
  double value;
};

struct Timeline {
  bool detailed = false;      // samples and op details kept (for a trace)
  bool activity_recorded = true;  // busy SMs and egress bytes known (simulated), not only op times (measured)
  std::vector<OpTiming> ops;  // indexed by OpId
  // Per op, only when detailed or measured (empty otherwise, so a plain run does not
  // carry a string per op): tile and split for GEMMs, protocol and channels for NCCL.
  std::vector<std::string> details;
  const std::string& detail(std::size_t id) const {
    static const std::string none;
    return id < details.size() ? details[id] : none;
  }
  std::vector<double> busy_sm_time;               // per rank: integral of busy SMs over time (SM x ps)
  std::vector<std::vector<Sample>> busy_sms;      // per rank, detailed only: (time, busy SMs)
  std::vector<std::vector<Sample>> egress_rate;   // per rank, detailed only: (time, egress bytes/ps)
  std::vector<double> egress_bytes;               // per rank, integrated
  std::vector<double> egress_bytes_across_nodes;  // per rank: of egress_bytes, what went to other nodes
  std::vector<int> sm_count;                      // per rank
  std::vector<double> egress_capacity;              // per rank: all its links at once, bytes/ps
  std::uint64_t events = 0;
  std::int64_t blocks = 0;
};

}  // namespace tpsim
