#pragma once
// Measured times that calibration fits the hardware model to. One format for
// hand-transcribed published numbers, `tpsim microbench` output and what is
// imported from PyTorch profiler traces or `tpsim measure` results:
//   {"format": "tpsim-measurements", "hardware": "h100_sxm", "measurements": [
//     {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16", "tflops": 798, "source": "..."}, ...]}
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpsim/cost/attention_cost.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/nccl_cost.hpp"
#include "tpsim/dag/op.hpp"
#include "tpsim/io/json_reader.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

enum class MeasurementKind {
  gemm,                  // one GEMM alone on one GPU: kernel time
  peer_copy,             // copy-engine copy to another GPU: copy time
  local_copy,            // device-to-device copy on one GPU (an SM kernel): kernel time
  all_gather,            // NCCL ring collective over `gpus`: kernel time on rank 0
  reduce_scatter,
  all_reduce,            // NCCL all-reduce over `gpus` (`bytes`: the buffer each rank holds)
  all_to_all,            // NCCL all-to-all over `gpus`: grouped send/recv, 1/gpus of each rank's `bytes` to every peer
  send_recv,             // NCCL ring step over `gpus`: each rank sends `bytes` to the next and receives as much
                         // from the one behind, one grouped call on a communicator of all `gpus`
  barrier,               // cross-GPU barrier over `gpus`
  launch,                // a tiny kernel, from the host's call to its end
  gemm_with_peer_copy,   // 2 GPUs: each runs the GEMM while it copies `bytes` to the other; GEMM time
  peer_copy_with_gemm,   // the same pair, timed the other way: the copy's time while the GEMM runs
                         // (async TP's pull beside the other stream's submatmul)
  gemm_with_collective,  // `gpus` GPUs: each runs the GEMM while a collective runs; GEMM time
  gemm_pair,             // one GPU: the GEMM on two streams at once (async TP's alternating
                         // streams): from the first start to the last end
  reduction,             // one GPU: `partials` stacked partials of `bytes` each summed into one
                         // (the end of async TP's matmul -> reduce-scatter): kernel time
  scenario,              // a whole scenario variant: makespan, or one named op's time in it
  attention,             // one flash-attention kernel (forward or backward) on one GPU: kernel time
  elementwise,           // one element-wise kernel on one GPU (`bytes_read`, `bytes_written`, and for an
                         // ATen `cast` or `strided` loop its output `elements`): kernel time
};

// How a row was timed. `kernel`: the op's own device time (CUPTI, a profiler trace). `events`:
// CUDA events recorded on the op's stream before and after its launch (`tpsim microbench`,
// torch.cuda.Event): the span also holds the launch gap from the start event to the kernel.
enum class MeasurementTiming { kernel, events };

std::string_view measurement_kind_name(MeasurementKind k);
// The op class an error report groups by: gemm, copy, collective, barrier, launch, interference,
// reduction, attention, elementwise, scenario.
std::string_view measurement_class(MeasurementKind k);

struct Measurement {
  std::string name;    // readable, e.g. "gemm 8192x8192x8192 bf16"
  std::string origin;  // file and JSON path it came from
  std::string source;  // who measured it, where
  MeasurementKind kind = MeasurementKind::gemm;
  GemmProblem gemm{};  // gemm kinds
  AttentionProblem attention{};  // attention kind
  ElementwiseOp elementwise{};   // elementwise kind
  double bytes = 0;    // copies, collectives (the whole buffer), interference
  int gpus = 1;        // the GPUs that meet in one collective or barrier
  int groups = 1;      // collective kinds: so many groups of `gpus` GPUs run it at once (group 0's is timed)
  bool nccl_nvls = true;  // collective kinds: false where the run had NVLink SHARP off (NCCL_NVLS_ENABLE=0)
  CollectiveKind collective = CollectiveKind::all_gather;  // gemm_with_collective
  std::shared_ptr<const Scenario> scenario;                // scenario kind: one variant
  std::string op;   // scenario kind: when set, the device time of this op on `op_rank` instead of the makespan
  int op_rank = 0;
  double time_us = 0;  // the measured (median) time
  double weight = 1;   // in the fit's sum of squared log errors
  std::string hardware;  // the hardware its file says it was measured on ("" when it does not say)
  std::string kernel;    // the kernel that ran (GEMMs: the vendor's, microbench: cuBLASLt's pick), for the record
  int partials = 0;      // reduction: how many stacked partials are summed
  ReductionKernel reduction = ReductionKernel::aten_sum;  // reduction: which kernel sums them
  MeasurementTiming timing = MeasurementTiming::kernel;   // op-level kinds; not launch or scenario
  // Op-level kinds: timed in a short burst after idle (`"clock": "burst"`: tensor cores at the
  // clock ceiling, power.burst_speed) rather than sustained at the clock the power limit allows.
  bool burst_clock = false;
  // Op-level kinds: the L2 the op's first kernel found (`"l2"`: a flush before each timed call).
  L2Start l2_start = L2Start::back_to_back;
};

// Every GEMM row's dtype must be one `hw` computes in (as `run` requires of a scenario), and
// every attention row's kernel one it has.
void check_hardware_serves(const std::vector<Measurement>& ms, const HardwareSpec& hw);
// Whether the row was timed in a burst: its own clock, or its scenario's software.clock.
bool timed_in_burst(const Measurement& m);
// Burst-timed rows on hardware that gives no power.burst_speed are predicted at its parameters'
// rate; this says so (nullopt where no row is affected).
std::optional<std::string> burst_clock_note(const std::vector<Measurement>& ms, const HardwareSpec& hw);

// The L2 a row's op started from: its own "l2", or its scenario's software.l2.
L2Start l2_start_of(const Measurement& m);
// Rows after a flush on hardware without memory.l2_* are predicted as back to back; this says so.
std::optional<std::string> l2_start_note(const std::vector<Measurement>& ms, const HardwareSpec& hw);

// Strict: every problem is an InputError naming `source` and the JSON path.
std::vector<Measurement> parse_measurements(const Json& j, const std::string& source);
// A measurement file, a PyTorch profiler (Kineto) trace or a `tpsim measure` /
// `tpsim run --json` result, told apart by their top-level keys.
std::vector<Measurement> load_measurements_file(const std::string& file);

Json measurement_json(const Measurement& m);  // without scenario measurements' scenario
Json measurements_file_json(const std::vector<Measurement>& ms, const std::string& hardware, const std::string& description);

}  // namespace tpsim
