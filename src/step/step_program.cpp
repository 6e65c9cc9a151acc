#include "tpsim/step/step_program.hpp"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/step/pipeline_order.hpp"

namespace tpsim {

namespace {

struct Charge {
  Tick work = 0;
  LinkTier tier = LinkTier::nvlink;
  int sms = 0;
  double wire_bytes = 0;
};

class ProgramBuilder {
 public:
  ProgramBuilder(const TrainingStepSpec& t, const LayerCosts& c, const HardwareSpec& hw, Dtype dtype)
      : t_(t), c_(c), hw_(hw), e_(dtype_bytes(dtype)) {
    pp_ = t.mesh.size(MeshDim::pp);
    tp_ = t.mesh.size(MeshDim::tp);
    fsdp_ = t.mesh.size(MeshDim::fsdp);
    dp_ = t.mesh.size(MeshDim::dp);
    plan_.program.stages = pp_;
    plan_.program.sm_count = hw.sm.count;
    split_layers();
    price_collectives();
  }

  StepPlan build() {
    for (int r = 0; r < pp_; ++r) {
      plan_.stage_params.push_back(stage_params(r));
      build_rank(r);
    }
    for (const auto& [task, key] : pending_) {
      const auto it = sends_.find(key);
      if (it == sends_.end()) throw std::logic_error("pipeline transfer without a sender");
      plan_.program.tasks[static_cast<std::size_t>(task)].deps.push_back(it->second);
    }
    return std::move(plan_);
  }

 private:
  // Layers over chunks as evenly as they go; the first chunks take one more.
  void split_layers() {
    const int chunks = t_.chunks();
    const auto layers = static_cast<int>(t_.model.layers);
    int next = 0;
    for (int c = 0; c < chunks; ++c) {
      const int n = layers / chunks + (c < layers % chunks ? 1 : 0);
      std::vector<int> ids;
      for (int i = 0; i < n; ++i) ids.push_back(next++);
      plan_.layers_of_chunk.push_back(std::move(ids));
    }
    plan_.last_stage = (chunks - 1) % pp_;
  }

  GroupLayout layout(MeshDim d) const {
    const int leaf = hw_.cluster.present() ? hw_.cluster.nodes_per_leaf : 0;
    return group_layout(t_.mesh, d, hw_.fabric.gpus_per_node, leaf);
  }

  Charge price(const std::string& dim, const std::string& op, GroupOp kind, double bytes, const GroupLayout& g) {
    StepCollective sc{dim, op, bytes, group_collective_cost(kind, bytes, g, hw_), 0};
    plan_.collectives.push_back(sc);
    return {sc.cost.time, sc.cost.tier, sc.cost.channels, sc.cost.wire_bytes};
  }

  void price_collectives() {
    const double layer = t_.model.layer_params() / tp_;
    const double grad = dtype_bytes(t_.grad_reduce_dtype);
    if (fsdp_ > 1) {
      const GroupLayout g = layout(MeshDim::fsdp);
      gather_ = price("fsdp", "all_gather", GroupOp::all_gather, layer * e_, g);
      reduce_ = price("fsdp", "reduce_scatter", GroupOp::reduce_scatter, layer * grad, g);
      // The embedding and output layer are their own FSDP units in torchtitan; charged with the first and last layer.
      const double extra = t_.model.embedding_params() / tp_;
      gather_edge_ = price("fsdp", "all_gather (embedding or output layer)", GroupOp::all_gather, extra * e_, g);
      reduce_edge_ = price("fsdp", "reduce_scatter (embedding or output layer)", GroupOp::reduce_scatter, extra * grad, g);
    }
    if (dp_ > 1) {
      const GroupLayout g = layout(MeshDim::dp);
      all_reduce_ = price("dp", "all_reduce", GroupOp::all_reduce, layer / fsdp_ * grad, g);
      all_reduce_edge_ = price("dp", "all_reduce (embedding or output layer)", GroupOp::all_reduce,
                               t_.model.embedding_params() / tp_ / fsdp_ * grad, g);
    }
    if (pp_ > 1) {
      const double act = static_cast<double>(t_.microbatch_tokens()) / tp_ * static_cast<double>(t_.model.hidden) * e_;
      send_ = price("pp", "send_recv", GroupOp::send_recv, act, layout(MeshDim::pp));
    }
  }

  int comm(int stage, StepStream stream, const std::string& dim, std::string name, const Charge& ch, std::vector<int> deps) {
    StepTask task;
    task.stage = stage;
    task.stream = stream;
    task.name = std::move(name);
    task.dim = dim;
    task.work = ch.work;
    task.communication = true;
    task.tier = ch.tier;
    task.sms = ch.sms;
    task.wire_bytes = ch.wire_bytes;
    task.deps = std::move(deps);
    return plan_.program.add(std::move(task));
  }

  int compute(int stage, std::string name, Tick work, double activation, std::vector<int> deps) {
    StepTask task;
    task.stage = stage;
    task.name = std::move(name);
    task.work = work;
    task.activation_bytes = activation;
    task.deps = std::move(deps);
    const int id = plan_.program.add(std::move(task));
    history_.push_back(id);
    return id;
  }

  // FSDP2 keeps at most two layers gathered: the next all-gather waits for the layer two back.
  std::vector<int> gather_window() const {
    if (history_.size() < 2) return {};
    return {history_[history_.size() - 2]};
  }

  bool edge(int layer) const { return layer == 0 || layer == t_.model.layers - 1; }

  void build_rank(int rank) {
    history_.clear();
    const int last_chunk = t_.chunks() - 1;
    const bool keep = pp_ > 1;  // gathered parameters kept from forward to backward
    const double act = activation_bytes_per_layer(t_, t_.checkpoint, e_);
    std::map<int, bool> gathered;
    std::map<int, int> backwards_seen;
    int last_reduce = -1, last_all_reduce = -1;
    for (const PipelineWork& w : pipeline_order(t_.schedule, pp_, t_.virtual_stages, t_.microbatches, rank)) {
      const auto& layers = plan_.layers_of_chunk[static_cast<std::size_t>(w.chunk)];
      const std::string mb = fmt::format("mb{}", w.microbatch);
      int last = -1;
      if (w.forward) {
        for (std::size_t i = 0; i < layers.size(); ++i) {
          const int l = layers[i];
          std::vector<int> deps;
          if (fsdp_ > 1 && !(keep && gathered[l])) {
            gathered[l] = true;
            const Charge ch = edge(l) ? add(gather_, gather_edge_) : gather_;
            deps.push_back(comm(rank, StepStream::fsdp_gather, "fsdp", fmt::format("fsdp.all_gather.layer{}", l), ch, gather_window()));
          }
          const Tick work = c_.forward + (l == 0 ? c_.embedding_forward : 0) + (l == t_.model.layers - 1 ? c_.output_forward : 0);
          last = compute(rank, fmt::format("layer{}.forward.{}", l, mb), work, act, deps);
          if (i == 0 && w.chunk > 0) pending_.push_back({last, key(w.chunk - 1, w.microbatch, true)});
        }
        if (w.chunk < last_chunk)
          sends_[key(w.chunk, w.microbatch, true)] =
              comm(rank, StepStream::pp_forward, "pp", fmt::format("pp.send.activations.chunk{}.{}", w.chunk, mb), send_, {last});
      } else {
        const bool final_backward = ++backwards_seen[w.chunk] == t_.microbatches;
        for (std::size_t i = layers.size(); i-- > 0;) {
          const int l = layers[i];
          std::vector<int> deps;
          if (fsdp_ > 1 && !keep) {
            const Charge ch = edge(l) ? add(gather_, gather_edge_) : gather_;
            deps.push_back(comm(rank, StepStream::fsdp_gather, "fsdp", fmt::format("fsdp.all_gather.layer{}.backward", l), ch, gather_window()));
          }
          const Tick work = c_.backward + c_.recompute + (l == 0 ? c_.embedding_backward : 0) +
                            (l == t_.model.layers - 1 ? c_.output_backward : 0);
          last = compute(rank, fmt::format("layer{}.backward.{}", l, mb), work, -act, deps);
          if (i + 1 == layers.size() && w.chunk < last_chunk) pending_.push_back({last, key(w.chunk + 1, w.microbatch, false)});
          int grads_ready = last;
          if (fsdp_ > 1 && (!keep || final_backward)) {
            const Charge ch = edge(l) ? add(reduce_, reduce_edge_) : reduce_;
            grads_ready = last_reduce = comm(rank, StepStream::fsdp_reduce, "fsdp", fmt::format("fsdp.reduce_scatter.layer{}", l), ch, {last});
          }
          // DDP reduces once, after the last microbatch; HSDP after every reduce-scatter.
          if (dp_ > 1 && ((fsdp_ > 1 && grads_ready != last) || (fsdp_ == 1 && final_backward))) {
            const Charge ch = edge(l) ? add(all_reduce_, all_reduce_edge_) : all_reduce_;
            last_all_reduce = comm(rank, StepStream::dp_reduce, "dp", fmt::format("dp.all_reduce.layer{}", l), ch, {grads_ready});
          }
        }
        if (w.chunk > 0)
          sends_[key(w.chunk, w.microbatch, false)] =
              comm(rank, StepStream::pp_backward, "pp", fmt::format("pp.send.gradients.chunk{}.{}", w.chunk, mb), send_, {last});
      }
    }
    std::vector<int> deps;
    if (last_reduce >= 0) deps.push_back(last_reduce);
    if (last_all_reduce >= 0) deps.push_back(last_all_reduce);
    compute(rank, "optimizer.step", optimizer_time(hw_, plan_.stage_params[static_cast<std::size_t>(rank)] / tp_ / fsdp_), 0, deps);
  }

  double stage_params(int rank) const {
    double p = 0;
    for (int c = rank; c < t_.chunks(); c += pp_)
      for (int l : plan_.layers_of_chunk[static_cast<std::size_t>(c)]) {
        p += t_.model.layer_params();
        if (l == 0) p += t_.model.embedding_params();                   // token embedding
        if (l == t_.model.layers - 1) p += t_.model.embedding_params();  // output projection (untied)
      }
    return p;
  }

  static Charge add(const Charge& a, const Charge& b) {
    return {a.work + b.work, a.tier, std::max(a.sms, b.sms), a.wire_bytes + b.wire_bytes};
  }
  static std::int64_t key(int chunk, int mb, bool forward) { return (static_cast<std::int64_t>(chunk) << 33) | (std::int64_t{mb} << 1) | forward; }

  const TrainingStepSpec& t_;
  const LayerCosts& c_;
  const HardwareSpec& hw_;
  double e_;
  int pp_ = 1, tp_ = 1, fsdp_ = 1, dp_ = 1;
  Charge gather_, reduce_, gather_edge_, reduce_edge_, all_reduce_, all_reduce_edge_, send_;
  StepPlan plan_;
  std::vector<int> history_;
  std::map<std::int64_t, int> sends_;
  std::vector<std::pair<int, std::int64_t>> pending_;
};

}  // namespace

StepPlan plan_step(const TrainingStepSpec& t, const LayerCosts& c, const HardwareSpec& hw, Dtype dtype) {
  return ProgramBuilder(t, c, hw, dtype).build();
}

}  // namespace tpsim
