#pragma once
// The op DAG of one variant over all ranks: a Boost.Graph graph whose vertices
// are ops and whose edges are dependencies (stream order, event record -> wait).
// Cross-rank rendezvous (collectives, barriers) is by group id, not by edges, so
// the graph stays acyclic; each rendezvous group belongs to a process group (the
// ranks that meet there, in ring order). Vertex order is host program order on each rank.
#include <memory>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "tpsim/dag/op.hpp"
#include "tpsim/dag/process_group.hpp"

namespace tpsim {

// Edges are kept in one vector (EdgeList vecS), not a node per edge: ops are only ever added.
using DagGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Op, boost::no_property, boost::no_property,
                                       boost::vecS>;
using OpId = DagGraph::vertex_descriptor;

class Dag {
 public:
  // Past this many ops (about 1.3 GB of DAG) building stops with SimulationLimit.
  static constexpr std::size_t kMaxOps = 4'000'000;

  // Process group 0 is every rank, in rank order.
  explicit Dag(int ranks);
  static constexpr int kWorld = 0;

  // Room for about `ops` ops over all ranks, so a large graph is not copied as it grows.
  void reserve(std::size_t ops);
  // Appends an op to (rank, stream); it depends on the stream's previous op.
  OpId add(int rank, int stream, std::string name, OpPayload payload);
  int new_event() { return events_++; }
  // Registers the ranks (distinct, each a rank of the DAG) in ring order; returns its id.
  int add_process_group(std::vector<int> ranks);
  // A new rendezvous among the ranks of process group `pg`: every member must add
  // exactly one op with this group id.
  int new_group(int pg = kWorld);
  // record on `from`, wait on `to`: later ops on `to` run after earlier ops on `from`.
  void join(int rank, int from_stream, int to_stream, const std::string& name);

  void set_host_issue(HostIssue h) { host_issue_ = h; }
  HostIssue host_issue() const { return host_issue_; }
  int ranks() const { return ranks_; }
  int streams(int rank) const;
  int groups() const { return static_cast<int>(group_pg_.size()); }
  int process_groups() const { return static_cast<int>(process_groups_.size()); }
  const ProcessGroup& process_group(int pg) const { return process_groups_.at(static_cast<std::size_t>(pg)); }
  // The process group whose ranks meet at rendezvous `group`.
  const ProcessGroup& process_group_of(int group) const { return process_group(group_pg_.at(static_cast<std::size_t>(group))); }
  int process_group_id_of(int group) const { return group_pg_.at(static_cast<std::size_t>(group)); }
  std::size_t size() const { return boost::num_vertices(*g_); }
  const DagGraph& graph() const { return *g_; }
  const Op& op(OpId id) const { return (*g_)[id]; }
  const std::vector<OpId>& program(int rank) const { return program_[static_cast<std::size_t>(rank)]; }
  // The record op a wait depends on (throws if the event was never recorded).
  OpId record_of(int event) const;

  // Throws std::logic_error when the graph has a cycle or a wait without a record.
  void validate() const;

 private:
  int ranks_;
  HostIssue host_issue_ = HostIssue::compiled;
  int events_ = 0;
  std::vector<ProcessGroup> process_groups_;
  std::vector<int> group_pg_;  // rendezvous group -> process group
  std::vector<std::vector<bool>> member_;  // process group -> rank -> member
  // Boost 1.74's adjacency_list has no move constructor: held by pointer so that
  // moving a Dag does not copy the graph.
  std::unique_ptr<DagGraph> g_ = std::make_unique<DagGraph>();
  std::vector<std::vector<OpId>> program_;
  std::vector<std::vector<long>> last_on_stream_;  // -1 when empty
  std::vector<long> record_for_event_;
};

}  // namespace tpsim
