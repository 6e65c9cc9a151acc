#include "tpsim/runtime/rendezvous.hpp"

namespace tpsim {

Rendezvous::Rendezvous(const Dag& dag)
    : members_(static_cast<std::size_t>(dag.groups())), arrived_(members_.size(), 0),
      ranks_(dag.ranks()) {
  for (OpId id = 0; id < dag.size(); ++id) {
    const int g = rendezvous_group(dag.op(id));
    if (g >= 0) members_[static_cast<std::size_t>(g)].push_back(id);
  }
}

void Rendezvous::arrive(int group, const std::function<void(const std::vector<OpId>&)>& on_all) {
  const auto g = static_cast<std::size_t>(group);
  if (++arrived_[g] == ranks_) on_all(members_[g]);
}

}  // namespace tpsim
