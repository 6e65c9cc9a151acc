#pragma once
// A process group: the ranks that take part in a collective, barrier, send/recv
// or fused ring kernel, listed in ring order (rank i's successor is i+1, wrapping).
// A DAG holds one per group of ranks that communicates (the world, a TP group of a
// larger DAG); each rendezvous belongs to one.
#include <vector>

namespace tpsim {

struct ProcessGroup {
  std::vector<int> ranks;

  int size() const { return static_cast<int>(ranks.size()); }
  // Global rank of member `i` (taken modulo the size, so i+1 and i-1 are ring neighbours).
  int rank(int i) const {
    const int n = size();
    return ranks[static_cast<std::size_t>(((i % n) + n) % n)];
  }
  // Position of `global_rank` in the ring, or -1 when it is not a member.
  int index_of(int global_rank) const {
    for (int i = 0; i < size(); ++i)
      if (ranks[static_cast<std::size_t>(i)] == global_rank) return i;
    return -1;
  }
};

}  // namespace tpsim
