#pragma once
// The vendor library's split-K choice (gemm.library_split: cuBLAS's, where it was measured):
// when it splits a GEMM's K, into how many slices, and how it ranks the candidate tiles.
#include "tpsim/core/tick.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/hw/hardware_spec.hpp"

namespace tpsim {

// Whether the library splits this problem's K: a single GEMM it runs, of a dtype whose choice
// was measured, with fewer reference tiles of output than SMs x (1 - depth / K).
bool library_splits_k(const GemmProblem& p, const HardwareSpec& hw);

// The slices it cuts for this tile: as many as fill one wave of its tiles, each at least
// min_slice deep, at most gemm.max_split_k; 1 where that leaves none to add.
int library_split_slices(const GemmProblem& p, const GemmTile& tile, const HardwareSpec& hw);

// What it ranks a split plan by: the kernel's ramp, its waves of block prologue and tile math,
// the reduction's start-up; no HBM traffic.
Tick library_rank_time(const GemmPlan& plan, const HardwareSpec& hw);

}  // namespace tpsim
