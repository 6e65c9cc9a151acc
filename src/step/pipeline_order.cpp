#include "tpsim/step/pipeline_order.hpp"

#include <algorithm>
#include <map>

namespace tpsim {

namespace {

constexpr PipelinePass F = PipelinePass::forward, B = PipelinePass::backward;

// Microbatches per round as PyTorch's interleaved schedules count them: m / max(1, m / pp)
// (the loader checks that the rounds divide m).
int microbatches_per_round(int pp, int microbatches) { return microbatches / std::max(1, microbatches / pp); }

std::vector<PipelineWork> gpipe(int rank, int m) {
  std::vector<PipelineWork> out;
  for (int i = 0; i < m; ++i) out.push_back({rank, i, F});
  for (int i = 0; i < m; ++i) out.push_back({rank, i, B});
  return out;
}

std::vector<PipelineWork> one_f_one_b(int pp, int rank, int m) {
  std::vector<PipelineWork> out;
  const int warmup = std::min(pp - rank - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({rank, i, F});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({rank, warmup + i, F});
    out.push_back({rank, i, B});
  }
  for (int i = m - warmup; i < m; ++i) out.push_back({rank, i, B});
  return out;
}

std::vector<PipelineWork> interleaved(int pp, int v, int rank, int m) {
  const int total = m * v, group = pp * v;
  // The k-th virtual microbatch: microbatches go in groups of pp through one chunk, then the next chunk.
  const auto work = [&](int k, bool forward) {
    const int local = (k % group) / pp;
    const int chunk_of_rank = forward ? local : v - 1 - local;
    return PipelineWork{chunk_of_rank * pp + rank, (k / group) * pp + k % pp, forward ? F : B};
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

// ScheduleInterleavedZeroBubble._calculate_single_rank_operations and _get_1f1b_rank_ops
// (enable_zero_bubble): ops are numbered 0 .. total + warmup - 1; op k forwards (while
// k < total) the chunk of round k / round, and (from k = warmup) runs the input gradient
// of the chunk of round (k - warmup) / round, counted backwards.
std::vector<PipelineWork> interleaved_zero_bubble(int pp, int v, int rank, int m) {
  const int round = microbatches_per_round(pp, m), total = m * v;
  const int warmup = std::min((v - 1) * round + pp - 1 - rank, total);
  const auto forward_chunk = [&](int k) { return (k / round) % v * pp + rank; };
  const auto backward_chunk = [&](int k) { return (v - 1 - (k - warmup) / round % v) * pp + rank; };
  std::map<int, int> next_forward, next_input, next_weight;  // per chunk: its next microbatch
  std::vector<int> input_ops;  // the op numbers of the input gradients run so far
  std::size_t weights = 0;
  std::vector<PipelineWork> out;
  const auto weight = [&] {
    const int c = backward_chunk(input_ops[weights++]);
    out.push_back({c, next_weight[c]++, PipelinePass::backward_weight});
  };
  for (int k = 0; k < total + warmup; ++k) {
    if (k < total) {
      const int c = forward_chunk(k);
      out.push_back({c, next_forward[c]++, F});
    }
    if (k < warmup) continue;
    const int c = backward_chunk(k);
    out.push_back({c, next_input[c]++, PipelinePass::backward_input});
    input_ops.push_back(k);
    if (k - warmup >= rank) weight();
  }
  while (weights < input_ops.size()) weight();
  return out;
}

// ScheduleZBVZeroBubble._calculate_single_rank_operations: counted as if there were at least
// 2 pp - 1 microbatches, the ones beyond m then dropped.
std::vector<PipelineWork> zbv(int pp, int rank, int m) {
  const int n = std::max(2 * pp - 1, m), first = rank, second = 2 * pp - 1 - rank;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  std::vector<PipelineWork> out;
  const auto add = [&](int chunk, PipelinePass pass, int mb) {
    if (mb < m) out.push_back({chunk, mb, pass});
  };
  constexpr PipelinePass I = PipelinePass::backward_input, W = PipelinePass::backward_weight;
  for (int i = 0; i < 2 * (pp - rank) - 1; ++i) add(first, F, f0++);
  for (int i = 0; i < rank; ++i) add(second, F, f1++), add(first, F, f0++);
  for (int i = 0; i < pp - rank; ++i) add(second, F, f1++), add(second, I, b1), add(second, W, b1++);
  while (f1 < f0 || f0 < n) {
    if (f0 < n) add(first, F, f0++);
    add(first, I, b0), add(first, W, b0++);
    add(second, F, f1++), add(second, I, b1), add(second, W, b1++);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < rank; ++i) add(first, I, b0++), add(second, I, b1++);
  for (int i = 0; i < pp - rank; ++i) add(first, I, b0++), add(first, W, w0++);
  while (w1 < b1) add(second, W, w1++);
  while (w0 < b0) add(first, W, w0++);
  return out;
}

// ScheduleDualPipeV._calculate_single_rank_operations: a whole backward advances its chunk's
// input and weight counts alike; an input-gradient pass queues its weight pass, which runs
// when the order next asks for one.
std::vector<PipelineWork> dualpipev(int pp, int rank, int m) {
  const int first = rank, second = 2 * pp - 1 - rank;
  std::map<int, int> forwards, inputs;  // per chunk: its next microbatch
  std::vector<std::pair<int, int>> weights;  // (chunk, microbatch) waiting for their weight pass
  std::vector<PipelineWork> out;
  constexpr PipelinePass I = PipelinePass::backward_input;
  const auto add = [&](int chunk, PipelinePass pass) {
    const int mb = pass == F ? forwards[chunk]++ : inputs[chunk]++;
    out.push_back({chunk, mb, pass});
    if (pass == I) weights.emplace_back(chunk, mb);
  };
  const auto weight = [&] {
    if (weights.empty()) return;
    out.push_back({weights.front().first, weights.front().second, PipelinePass::backward_weight});
    weights.erase(weights.begin());
  };
  for (int i = 0; i < (pp - rank - 1) * 2; ++i) add(first, F);
  for (int i = 0; i < rank + 1; ++i) add(first, F), add(second, F);
  for (int i = 0; i < pp - rank - 1; ++i) add(second, I), weight(), add(second, F);
  // An OVERLAP_F_B pair: the forward, then the whole backward.
  for (int i = 0; i < m - 2 * pp + rank + 1; ++i) {
    add(first, F), add(second, B);
    add(second, F), add(first, B);
  }
  for (int i = 0; i < pp - rank - 1; ++i) add(second, B), add(second, F), add(first, B);
  const int cool = rank + 1;
  bool split = false;
  for (int i = 0; i < cool; ++i) {
    if (i == cool / 2 && rank % 2 == 1) split = true;
    add(second, split ? I : B);
    if (i == cool / 2 && rank % 2 == 0) split = true;
    add(first, split ? I : B);
  }
  for (int i = 0; i < pp - rank - 1; ++i) weight(), add(first, split ? I : B);
  for (int i = 0; i < rank + 1; ++i) weight();
  return out;
}

}  // namespace

int chunk_rank(PipelineSchedule s, int pp, int chunk) {
  if (s == PipelineSchedule::zbv_zero_bubble || s == PipelineSchedule::dualpipev) return chunk < pp ? chunk : 2 * pp - 1 - chunk;
  return chunk % pp;
}

std::vector<PipelineWork> pipeline_order(PipelineSchedule s, int pp, int virtual_stages, int microbatches, int rank) {
  switch (s) {
    case PipelineSchedule::gpipe: return gpipe(rank, microbatches);
    case PipelineSchedule::one_f_one_b: return one_f_one_b(pp, rank, microbatches);
    case PipelineSchedule::interleaved_1f1b: return interleaved(pp, virtual_stages, rank, microbatches);
    case PipelineSchedule::interleaved_zero_bubble: return interleaved_zero_bubble(pp, virtual_stages, rank, microbatches);
    case PipelineSchedule::zbv_zero_bubble: return zbv(pp, rank, microbatches);
    case PipelineSchedule::dualpipev: return dualpipev(pp, rank, microbatches);
  }
  return {};
}

}  // namespace tpsim
