#pragma once
// `tpsim microbench`'s rows measured one by one and kept on disk as they come. After each
// row the measurement file is rewritten whole (atomically) with every row so far, and a
// marker beside it (OUTPUT.progress) says the run is unfinished: a run that is stopped (a
// time limit, a lost GPU) keeps what it measured, and the same command resumes it.
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "tpsim/calibration/measurement.hpp"

namespace tpsim {

struct MicrobenchFiles {
  std::string output;       // the measurement file
  std::string source;       // every row's `source` (machine, repeats): a resumed row must match it
  std::string description;  // the file's
};

struct MicrobenchOutcome {
  int measured = 0;                 // rows this run measured
  int resumed = 0;                  // rows kept from the unfinished run it resumed
  int not_offered = 0;              // rows this machine has nothing to run for (see run_microbench)
  int waiting = 0;                  // rows not wanted this time, left for a later run of the same output
  std::vector<std::string> failed;  // "name: why" of rows the GPUs could not run (left out of the file)
};

// OUTPUT.progress: present while a run of OUTPUT is unfinished.
std::string progress_marker(const std::string& output);

// Measures every row of `plan` that an unfinished run of the same output has not kept, with
// `measure`, which throws GpuError for a row the GPUs could not run: that row is reported and
// left out, and the marker stays so the same command retries it. `measure` returns nullopt for
// a row this machine has nothing to run for (an algorithm its cuBLASLt does not offer): left
// out, said so, and not a failure. Only rows `wanted` accepts are measured (all, without it): the
// rest wait, and the marker stays until a run has them all. Without a marker an existing output
// is replaced. A kept row measured elsewhere (another `source`), or one the plan does not hold,
// is an InputError naming the marker. `log` gets a line per row.
MicrobenchOutcome run_microbench(const std::vector<Measurement>& plan, const MicrobenchFiles& files,
                                 const std::function<std::optional<Measurement>(const Measurement&)>& measure, std::ostream& log,
                                 const std::function<bool(const Measurement&)>& wanted = {});

}  // namespace tpsim
