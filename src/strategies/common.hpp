#pragma once
// Internal to strategies/: shard sizes and the pieces every decomposition uses.
#include <string>

#include <fmt/format.h>

#include "tpsim/dag/dag.hpp"
#include "tpsim/io/scenario.hpp"

namespace tpsim::strategy {

constexpr int kCompute = 0;  // the current stream
constexpr int kComm = 1;     // a second stream (PyTorch's backend stream, a comm stream)

struct Shards {
  int ranks = 0;
  std::int64_t rows = 0;     // m / ranks
  double shard_bytes = 0;    // one rank's rows of A: rows x k
  double chunk_bytes = 0;    // one rank's rows of the output: rows x (all n)
};

inline Shards shards_of(const Scenario& s) {
  Shards sh;
  sh.ranks = s.gpus;
  sh.rows = s.workload.m / s.gpus;
  const double e = dtype_bytes(s.dtype);
  sh.shard_bytes = static_cast<double>(sh.rows) * s.workload.k * e;
  sh.chunk_bytes = static_cast<double>(sh.rows) * s.workload.n_total() * e;
  return sh;
}

// `rows` of the activation against every weight (Q, K and V share one gathered shard).
inline void add_matmuls(Dag& dag, int rank, int stream, std::int64_t rows, const Scenario& s, const std::string& label,
                        double n_fraction = 1.0) {
  for (std::size_t i = 0; i < s.workload.n.size(); ++i) {
    const auto n = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(s.workload.n[i]) * n_fraction));
    const std::string name = s.workload.n.size() == 1 ? label : fmt::format("{}.w{}", label, i);
    dag.add(rank, stream, name, GemmOp{{rows, n, s.workload.k, s.dtype}});
  }
}

inline int wrap(int r, int g) { return ((r % g) + g) % g; }

}  // namespace tpsim::strategy
