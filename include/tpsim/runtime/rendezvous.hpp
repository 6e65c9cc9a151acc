#pragma once
// Cross-rank meeting points: a collective or barrier starts only when every
// rank of its process group has its kernel resident. A rank that never reaches the
// group leaves the others waiting, which the executor reports as stuck.
#include <functional>
#include <vector>

#include "tpsim/dag/dag.hpp"

namespace tpsim {

class Rendezvous {
 public:
  explicit Rendezvous(const Dag& dag);
  // Records one rank's arrival; when it completes the group, calls `on_all` with every
  // member, in the process group's ring order.
  void arrive(int group, const std::function<void(const std::vector<OpId>&)>& on_all);
  const std::vector<OpId>& members(int group) const { return members_[static_cast<std::size_t>(group)]; }

 private:
  std::vector<std::vector<OpId>> members_;
  std::vector<int> arrived_;
  std::vector<int> expected_;  // the process group's size
};

}  // namespace tpsim
