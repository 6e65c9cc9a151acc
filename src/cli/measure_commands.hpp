#pragma once
// `tpsim measure` and `tpsim microbench`: run DAGs on real GPUs through the CUDA
// backend (or print what would run, with --dry-run, on any machine).
#include <string>
#include <vector>

namespace tpsim::cli {

struct MeasureOptions {
  std::string output;  // result JSON (measure) or measurement file (microbench)
  std::string trace;
  bool dry_run = false;
  bool stand_in = false;  // measure: hold every SM for the simulated time of ops the backend cannot run
  int warmup = 3;
  int repeat = 10;
  int gpus = 0;  // microbench: 0 = every GPU
  std::string dtype = "bf16";
  std::vector<std::string> only;  // microbench: measure only rows whose names contain one of these
};

int measure(const std::string& scenario_file, const MeasureOptions& o);
int microbench(const MeasureOptions& o);

}  // namespace tpsim::cli
