#pragma once
// Runs the coarse tasks of a training step (one layer's forward or backward on the
// compute stream, one collective on its own stream) on the simulated ranks, one per
// pipeline stage. Each stream runs its tasks in program order once their
// dependencies are done. Shared hardware is re-timed at every start and finish:
//  - a compute task slows while communication kernels of its rank hold SMs
//    (it runs on the SMs they leave);
//  - communication tasks of one rank on the same link tier (NVLink, NIC) share it
//    max-min fairly with the traffic of the compute task running beside them (the TP
//    collectives inside a layer pass, at their average rate over the pass): the pass
//    gets at most what it draws, each collective the rest in equal parts; a pass granted
//    less than it draws slows in proportion, as its traffic cannot get through sooner.
#include <cstdint>
#include <string>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/step/group_collective.hpp"

namespace tpsim {

enum class StepStream { compute, fsdp_gather, fsdp_reduce, dp_reduce, pp_forward, pp_backward, cp, ep };
constexpr int kStepStreams = 8;
std::string_view step_stream_name(StepStream s);

struct StepTask {
  int stage = 0;
  StepStream stream = StepStream::compute;
  std::string name;       // "layer3.forward.mb0", "fsdp.all_gather.layer3", ...
  std::string dim;        // mesh dimension of a communication task ("fsdp", "dp", "pp", "cp"); "" for compute
  Tick work = 0;          // duration alone on an idle GPU
  bool communication = false;
  LinkTier tier = LinkTier::nvlink;
  int sms = 0;            // SMs a communication kernel holds while it runs
  double wire_bytes = 0;  // bytes a communication task sends (for the trace's link counters)
  // A compute task's own traffic (a layer pass's TP collectives) per tier: bytes one GPU
  // sends, and the fraction of the tier's bandwidth that draws on average over the pass.
  PerTier link_bytes, link_load;
  double activation_bytes = 0;  // added to the stage's live activations when it ends (negative: freed)
  std::vector<int> deps;  // tasks (any stage) that must end first
  int phases = -1;        // a layer pass: its communication phases (StepPlan::phase_templates), for the trace
  int mix = -1;           // a compute task: what its time is spent on (StepProgram::mixes)
};

// A communication task on `stream` taking what `cost` charges (time, link tier, SMs held).
StepTask communication_task(StepStream stream, std::string name, std::string dim, const GroupCollectiveCost& cost,
                            std::vector<int> deps);

// A compute task's work by kind, as fractions of it summing to 1.
using WorkMix = std::vector<std::pair<std::string, double>>;

struct StepProgram {
  int stages = 1;
  int sm_count = 1;
  std::vector<StepTask> tasks;  // per (stage, stream): in the order they appear
  std::vector<WorkMix> mixes;   // shared by the tasks of the same kinds of work
  int add(StepTask t) {
    tasks.push_back(std::move(t));
    return static_cast<int>(tasks.size()) - 1;
  }
};

struct TaskTime {
  Tick start = 0, end = 0;
};

struct StageSummary {
  Tick compute_busy = 0;  // time its compute stream ran
  Tick end = 0;           // its last task's end
  double peak_activation_bytes = 0;
  // Compute-stream idle time by what it waited for: "pp" (another stage or a transfer),
  // "fsdp", "dp"; a gap with no dependency to blame (host order) counts as "other".
  std::vector<std::pair<std::string, Tick>> idle_by_cause;
  // Compute-stream busy time by kind of work, as each task's mix splits its time there
  // (slowed by communication kernels or not); sums to compute_busy.
  std::vector<std::pair<std::string, Tick>> busy_by_kind;
};

struct StepSimulation {
  std::vector<TaskTime> times;  // per task
  Tick makespan = 0;
  std::vector<StageSummary> stages;
  std::uint64_t events = 0;
};

// Throws std::logic_error when the program cannot finish (a dependency cycle).
StepSimulation simulate_step(const StepProgram& program);

}  // namespace tpsim
