#include "tpsim/dag/dag.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/core/invariant.hpp"

namespace tpsim {

Dag::Dag(int ranks) : ranks_(ranks), program_(static_cast<std::size_t>(ranks)), last_on_stream_(static_cast<std::size_t>(ranks)) {
  std::vector<int> world(static_cast<std::size_t>(std::max(ranks, 0)));
  for (int r = 0; r < ranks; ++r) world[static_cast<std::size_t>(r)] = r;
  add_process_group(std::move(world));
}

int Dag::add_process_group(std::vector<int> ranks) {
  if (ranks.empty() && ranks_ > 0) throw std::logic_error("a process group needs at least one rank");
  std::vector<bool> member(static_cast<std::size_t>(ranks_), false);
  for (int r : ranks) {
    if (r < 0 || r >= ranks_) throw std::logic_error(fmt::format("process group rank {} is not one of the DAG's {} ranks", r, ranks_));
    if (member[static_cast<std::size_t>(r)]) throw std::logic_error(fmt::format("process group lists rank {} twice", r));
    member[static_cast<std::size_t>(r)] = true;
  }
  process_groups_.push_back(ProcessGroup{std::move(ranks)});
  member_.push_back(std::move(member));
  return static_cast<int>(process_groups_.size()) - 1;
}

int Dag::new_group(int pg) {
  if (pg < 0 || pg >= process_groups()) throw std::logic_error(fmt::format("no process group {}", pg));
  group_pg_.push_back(pg);
  return static_cast<int>(group_pg_.size()) - 1;
}

void Dag::reserve(std::size_t ops) {
  ops = std::min(ops, kMaxOps);
  // vecS keeps the vertices in one std::vector, m_vertices (public in Boost's
  // vec_adj_list_impl, with no reserve of its own).
  g_->m_vertices.reserve(ops);
  for (auto& p : program_) p.reserve(ops / program_.size() + 1);
}

OpId Dag::add(int rank, int stream, std::string name, OpPayload payload) {
  if (rank < 0 || rank >= ranks_ || stream < 0) throw std::logic_error("op on a rank or stream that does not exist");
  if (boost::num_vertices(*g_) >= kMaxOps)
    throw SimulationLimit(fmt::format("the op graph would have more than {} ops: simulate fewer layers or GPUs", kMaxOps));
  Op op{std::move(name), rank, stream, std::move(payload)};
  if (const int g = rendezvous_group(op); g >= 0) {
    // A rank outside the group would wait at a meeting its peers never come to, and a
    // send to one would have no receiver in the communicator.
    if (g >= groups()) throw std::logic_error(fmt::format("rank {} '{}': rendezvous {} was never created", rank, op.name, g));
    const std::vector<bool>& member = member_[static_cast<std::size_t>(group_pg_[static_cast<std::size_t>(g)])];
    const auto outside = [&](int r) { return r < 0 || r >= ranks_ || !member[static_cast<std::size_t>(r)]; };
    if (outside(rank)) throw std::logic_error(fmt::format("rank {} '{}': not a member of rendezvous {}'s process group", rank, op.name, g));
    if (const auto* s = std::get_if<SendRecvOp>(&op.payload))
      for (const Transfer& t : s->sends)
        if (outside(t.peer)) throw std::logic_error(fmt::format("rank {} '{}': sends to rank {} outside its process group", rank, op.name, t.peer));
    if (const auto* f = std::get_if<FusedRingGemmOp>(&op.payload); f && outside(f->send_to))
      throw std::logic_error(fmt::format("rank {} '{}': sends to rank {} outside its process group", rank, op.name, f->send_to));
  }
  const OpId id = boost::add_vertex(std::move(op), *g_);
  auto& last = last_on_stream_[static_cast<std::size_t>(rank)];
  if (last.size() <= static_cast<std::size_t>(stream)) last.resize(static_cast<std::size_t>(stream) + 1, -1);
  if (last[static_cast<std::size_t>(stream)] >= 0)
    boost::add_edge(static_cast<OpId>(last[static_cast<std::size_t>(stream)]), id, *g_);
  last[static_cast<std::size_t>(stream)] = static_cast<long>(id);
  program_[static_cast<std::size_t>(rank)].push_back(id);
  if (const auto* r = std::get_if<RecordOp>(&(*g_)[id].payload)) {
    if (record_for_event_.size() <= static_cast<std::size_t>(r->event))
      record_for_event_.resize(static_cast<std::size_t>(r->event) + 1, -1);
    record_for_event_[static_cast<std::size_t>(r->event)] = static_cast<long>(id);
  }
  if (const auto* w = std::get_if<WaitOp>(&(*g_)[id].payload)) {
    try {
      boost::add_edge(record_of(w->event), id, *g_);
    } catch (const std::logic_error& e) {
      throw std::logic_error(fmt::format("rank {} stream {} '{}': {}", rank, stream, (*g_)[id].name, e.what()));
    }
  }
  return id;
}

void Dag::join(int rank, int from_stream, int to_stream, const std::string& name) {
  const int e = new_event();
  add(rank, from_stream, name + ".record", RecordOp{e});
  add(rank, to_stream, name + ".wait", WaitOp{e});
}

int Dag::streams(int rank) const {
  return static_cast<int>(last_on_stream_[static_cast<std::size_t>(rank)].size());
}

OpId Dag::record_of(int event) const {
  if (event < 0 || static_cast<std::size_t>(event) >= record_for_event_.size() ||
      record_for_event_[static_cast<std::size_t>(event)] < 0)
    throw std::logic_error(fmt::format("wait on event {} that is never recorded", event));
  return static_cast<OpId>(record_for_event_[static_cast<std::size_t>(event)]);
}

// add() only ever adds edges into the op it appends (from its stream's previous op,
// from the record a wait names, which must exist already), so op order is a
// topological order. Checking that every edge points forward proves there is no
// cycle in one pass, without the search a topological sort makes.
void Dag::validate() const {
  for (auto [e, end] = boost::edges(*g_); e != end; ++e)
    if (boost::source(*e, *g_) >= boost::target(*e, *g_)) throw std::logic_error("op graph has a dependency cycle");
}

}  // namespace tpsim
