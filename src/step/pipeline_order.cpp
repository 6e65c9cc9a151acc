#include "tpsim/step/pipeline_order.hpp"

#include <algorithm>

namespace tpsim {

namespace {

std::vector<PipelineWork> gpipe(int rank, int m) {
  std::vector<PipelineWork> out;
  for (int i = 0; i < m; ++i) out.push_back({rank, i, true});
  for (int i = 0; i < m; ++i) out.push_back({rank, i, false});
  return out;
}

std::vector<PipelineWork> one_f_one_b(int pp, int rank, int m) {
  std::vector<PipelineWork> out;
  const int warmup = std::min(pp - rank - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({rank, i, true});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({rank, warmup + i, true});
    out.push_back({rank, i, false});
  }
  for (int i = m - warmup; i < m; ++i) out.push_back({rank, i, false});
  return out;
}

std::vector<PipelineWork> interleaved(int pp, int v, int rank, int m) {
  const int total = m * v, group = pp * v;
  // The k-th virtual microbatch: microbatches go in groups of pp through one chunk, then the next chunk.
  const auto work = [&](int k, bool forward) {
    const int local = (k % group) / pp;
    const int chunk_of_rank = forward ? local : v - 1 - local;
    return PipelineWork{chunk_of_rank * pp + rank, (k / group) * pp + k % pp, forward};
  };
  const int warmup = std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
  std::vector<PipelineWork> out;
  for (int k = 0; k < warmup; ++k) out.push_back(work(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(work(warmup + k, true));
    out.push_back(work(k, false));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(work(k, false));
  return out;
}

}  // namespace

std::vector<PipelineWork> pipeline_order(PipelineSchedule s, int pp, int virtual_stages, int microbatches, int rank) {
  switch (s) {
    case PipelineSchedule::gpipe: return gpipe(rank, microbatches);
    case PipelineSchedule::one_f_one_b: return one_f_one_b(pp, rank, microbatches);
    case PipelineSchedule::interleaved_1f1b: return interleaved(pp, virtual_stages, rank, microbatches);
  }
  return {};
}

}  // namespace tpsim
