#include "tpsim/step/group_layout.hpp"

#include <algorithm>
#include <map>

namespace tpsim {

GroupLayout group_layout(const MeshShape& mesh, MeshDim d, int gpus_per_node, int nodes_per_leaf) {
  return group_layout(mesh, std::vector<MeshDim>{d}, gpus_per_node, nodes_per_leaf);
}

GroupLayout group_layout(const MeshShape& mesh, const std::vector<MeshDim>& dims, int gpus_per_node, int nodes_per_leaf) {
  GroupLayout g;
  g.ranks = 1;
  for (MeshDim d : dims) g.ranks *= mesh.size(d);
  // Member i's rank: its mixed-radix digits along the dims, each times that dim's stride.
  std::vector<std::int64_t> offsets{0};
  for (MeshDim d : dims) {
    std::vector<std::int64_t> next;
    for (int k = 0; k < mesh.size(d); ++k)
      for (std::int64_t o : offsets) next.push_back(o + k * mesh.stride(d));
    offsets = std::move(next);
  }
  std::sort(offsets.begin(), offsets.end());
  std::map<std::int64_t, int> per_node;  // node -> members (a group has at most kMaxClusterGpus members)
  std::int64_t last_leaf = -1, leaves = 0;
  for (std::int64_t rank : offsets) {
    const std::int64_t node = rank / gpus_per_node;
    if (++per_node[node] == 1) {
      const std::int64_t leaf = nodes_per_leaf > 0 ? node / nodes_per_leaf : 0;
      if (leaf != last_leaf) ++leaves, last_leaf = leaf;  // members in rank order, so leaves come in order too
    }
  }
  g.nodes = static_cast<int>(per_node.size());
  g.per_node = 0;
  for (const auto& [node, n] : per_node) g.per_node = std::max(g.per_node, n);
  g.leaves = static_cast<int>(leaves);
  return g;
}

}  // namespace tpsim
