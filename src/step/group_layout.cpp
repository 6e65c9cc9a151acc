#include "tpsim/step/group_layout.hpp"

#include <algorithm>
#include <map>

namespace tpsim {

GroupLayout group_layout(const MeshShape& mesh, MeshDim d, int gpus_per_node, int nodes_per_leaf) {
  GroupLayout g;
  g.ranks = mesh.size(d);
  const std::int64_t stride = mesh.stride(d);
  std::map<std::int64_t, int> per_node;  // node -> members (a group has at most kMaxClusterGpus members)
  std::int64_t first_leaf = -1, leaves = 0;
  for (int i = 0; i < g.ranks; ++i) {
    const std::int64_t node = i * stride / gpus_per_node;
    if (++per_node[node] == 1) {
      const std::int64_t leaf = nodes_per_leaf > 0 ? node / nodes_per_leaf : 0;
      if (leaf != first_leaf) ++leaves, first_leaf = leaf;  // members come in rank order, so leaves do too
    }
  }
  g.nodes = static_cast<int>(per_node.size());
  g.per_node = 0;
  for (const auto& [node, n] : per_node) g.per_node = std::max(g.per_node, n);
  g.leaves = static_cast<int>(leaves);
  return g;
}

}  // namespace tpsim
