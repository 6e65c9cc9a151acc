#include "tpsim/runtime/rendezvous.hpp"

#include <algorithm>

namespace tpsim {

Rendezvous::Rendezvous(const Dag& dag) : members_(static_cast<std::size_t>(dag.groups())), arrived_(members_.size(), 0) {
  for (OpId id = 0; id < dag.size(); ++id) {
    const int g = rendezvous_group(dag.op(id));
    if (g >= 0) members_[static_cast<std::size_t>(g)].push_back(id);
  }
  expected_.reserve(members_.size());
  for (std::size_t g = 0; g < members_.size(); ++g) {
    const ProcessGroup& pg = dag.process_group_of(static_cast<int>(g));
    expected_.push_back(pg.size());
    // Ring order: a member's successor is the next rank of its process group.
    std::stable_sort(members_[g].begin(), members_[g].end(),
                     [&](OpId a, OpId b) { return pg.index_of(dag.op(a).rank) < pg.index_of(dag.op(b).rank); });
  }
}

void Rendezvous::arrive(int group, const std::function<void(const std::vector<OpId>&)>& on_all) {
  const auto g = static_cast<std::size_t>(group);
  if (++arrived_[g] == expected_[g]) on_all(members_[g]);
}

}  // namespace tpsim
