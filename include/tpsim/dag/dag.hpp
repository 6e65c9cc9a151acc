#pragma once
// The op DAG of one variant over all ranks: a Boost.Graph graph whose vertices
// are ops and whose edges are dependencies (stream order, event record -> wait).
// Cross-rank rendezvous (collectives, barriers) is by group id, not by edges, so
// the graph stays acyclic. Vertex order is host program order on each rank.
#include <memory>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "tpsim/dag/op.hpp"

namespace tpsim {

using DagGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Op>;
using OpId = DagGraph::vertex_descriptor;

class Dag {
 public:
  // Past this many ops (about 1.3 GB of DAG) building stops with SimulationLimit.
  static constexpr std::size_t kMaxOps = 4'000'000;

  explicit Dag(int ranks);

  // Room for about `ops` ops over all ranks, so a large graph is not copied as it grows.
  void reserve(std::size_t ops);
  // Appends an op to (rank, stream); it depends on the stream's previous op.
  OpId add(int rank, int stream, std::string name, OpPayload payload);
  int new_event() { return events_++; }
  int new_group() { return groups_++; }
  // record on `from`, wait on `to`: later ops on `to` run after earlier ops on `from`.
  void join(int rank, int from_stream, int to_stream, const std::string& name);

  void set_host_issue(HostIssue h) { host_issue_ = h; }
  HostIssue host_issue() const { return host_issue_; }
  int ranks() const { return ranks_; }
  int streams(int rank) const;
  int groups() const { return groups_; }
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
  int groups_ = 0;
  // Boost 1.74's adjacency_list has no move constructor: held by pointer so that
  // moving a Dag does not copy the graph.
  std::unique_ptr<DagGraph> g_ = std::make_unique<DagGraph>();
  std::vector<std::vector<OpId>> program_;
  std::vector<std::vector<long>> last_on_stream_;  // -1 when empty
  std::vector<long> record_for_event_;
};

}  // namespace tpsim
