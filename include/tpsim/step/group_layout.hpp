#pragma once
// Where the members of one mesh dimension's process group sit: how many share a
// node, how many nodes and leaf switches the group spans. The mesh is laid out
// inner to outer (mesh_order), so a dimension's members are `stride` ranks apart.
#include <vector>

#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

struct GroupLayout {
  int ranks = 1;
  int per_node = 1;  // members in one node (the most in any node)
  int nodes = 1;     // nodes the group spans
  int leaves = 1;    // switch units (nodes_per_leaf nodes each) the group spans
  bool crosses_nodes() const { return nodes > 1; }
};

// The group of rank 0 (every group of a dimension is laid out alike when the
// dims inside it fill whole nodes or divide one; the parser keeps TP inside a node).
GroupLayout group_layout(const MeshShape& mesh, MeshDim d, int gpus_per_node, int nodes_per_leaf);
// A group over several dimensions at once (FSDP over fsdp x cp): its members are every
// combination of positions along them.
GroupLayout group_layout(const MeshShape& mesh, const std::vector<MeshDim>& dims, int gpus_per_node, int nodes_per_leaf);

}  // namespace tpsim
