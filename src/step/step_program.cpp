#include "tpsim/step/step_program.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <stdexcept>

#include <fmt/format.h>

#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/optimizer_step.hpp"
#include "tpsim/step/memory_ledger.hpp"
#include "tpsim/step/pipeline_order.hpp"
#include "tpsim/step/weight_gradients.hpp"
#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim {

namespace {

struct Charge {
  Tick work = 0;
  LinkTier tier = LinkTier::nvlink;
  int sms = 0;
  double wire_bytes = 0;
};

// FSDP2's copies on the compute stream around one FSDP unit's collectives
// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py): after an all-gather,
// split_with_sizes_copy of the whole gathered buffer into the parameters
// (foreach_all_gather_copy_out); before a reduce-scatter, chunk_cat of the unsharded
// gradients into its input, widened to the reduce dtype (foreach_reduce_scatter_copy_in).
// Widening, chunk_cat converts element by element: it ran at ATen's cast-loop rate on an H100
// and an H200 alike (729 and 673 us for a Llama 3 8B layer's 218M gradients, bf16 to fp32;
// models/measurements/step_profiles/), not at HBM's.
struct FsdpCopies {
  Tick copy_out = 0, grad_copy_in = 0;
};

class ProgramBuilder {
 public:
  ProgramBuilder(const TrainingStepSpec& t, const LayerCosts& c, const HardwareSpec& hw, Dtype dtype)
      : t_(t), c_(c), hw_(hw), e_(dtype_bytes(dtype)) {
    pp_ = t.mesh.size(MeshDim::pp);
    tp_ = t.mesh.size(MeshDim::tp);
    fsdp_ = t.shard_ranks();
    ep_ = t.mesh.size(MeshDim::ep);
    dp_ = t.mesh.size(MeshDim::dp);
    // torchtitan's ChunkedLossWrapper (components/loss.py, b5bcd76) unshards lm_head itself,
    // turns its gradient sync on for the last chunk and reshards it after the loop, on every
    // call: under a pipeline, whose no-sync it overrides, the output layer is gathered and
    // reduced once per microbatch, at the loss.
    loss_syncs_output_ = t.loss_chunks > 1 && pp_ > 1 && fsdp_ > 1;
    // torch.distributed.pipelining (stage.py: _setup_forward_recv_info, _create_grad_recv_info)
    // allocates, per stage and microbatch, a buffer to receive the activation into and one
    // for its gradient, held for good; a forward's output stays in fwd_cache until its
    // backward. Megatron-LM receives into fresh tensors and frees the sent output
    // (deallocate_pipeline_outputs), whether its sends block or not.
    if (pp_ > 1 && t.pp_torch_buffers) {
      const double rows = static_cast<double>(t.rank_tokens()) / (t.sequence_parallel ? tp_ : 1);
      boundary_bytes_ = rows * static_cast<double>(t.model.hidden) * e_;
    }
    plan_.program.stages = pp_;
    plan_.program.sm_count = hw.sm.count;
    if (t.splits_backward()) {
      kept_for_weights_ = weight_gradient_inputs_bytes(t, e_);
      if (t.model.is_moe()) kept_for_moe_weights_ = weight_gradient_inputs_bytes(t, e_, true);
    }
    split_layers();
    price_collectives();
    phase_templates();
  }

  StepPlan build() {
    for (int r = 0; r < pp_; ++r) {
      plan_.stages.push_back(stage_params(r));
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
  // Layers over chunks as evenly as they go, the first chunks taking one more, with the
  // embedding and output layer counted as pp_first/last_stage_less_layers layers
  // (torchtitan's generate_llm_fqn_per_model_part, torchtitan/distributed/pipeline_parallel.py).
  // A first or last chunk left with no decoder layer holds the embedding or output alone.
  void split_layers() {
    const int chunks = t_.chunks();
    const auto layers = static_cast<int>(t_.model.layers);
    const int effective = layers + t_.pp_embedding_weight + t_.pp_output_weight;
    int next = 0;
    for (int c = 0; c < chunks; ++c) {
      int n = effective / chunks + (c < effective % chunks ? 1 : 0);
      if (c == 0) n -= t_.pp_embedding_weight;
      if (c == chunks - 1) n -= t_.pp_output_weight;
      std::vector<int> ids;
      for (int i = 0; i < n && next < layers; ++i) ids.push_back(next++);
      if (ids.empty() && c == 0) ids.push_back(kEmbeddingAlone);
      if (ids.empty() && c == chunks - 1) ids.push_back(kOutputAlone);
      if (ids.empty()) throw std::logic_error("a pipeline chunk without layers");
      plan_.layers_of_chunk.push_back(std::move(ids));
    }
    embedding_alone_ = plan_.layers_of_chunk.front().front() == kEmbeddingAlone;
    output_alone_ = plan_.layers_of_chunk.back().back() == kOutputAlone;
    plan_.last_stage = chunk_rank(t_.schedule, pp_, chunks - 1);
  }

  GroupLayout layout(std::vector<MeshDim> dims) const {
    const int leaf = hw_.cluster.present() ? hw_.cluster.nodes_per_leaf : 0;
    return group_layout(t_.mesh, dims, hw_.fabric.gpus_per_node, leaf);
  }

  Charge price(const std::string& dim, const std::string& op, GroupOp kind, double bytes, const GroupLayout& g) {
    StepCollective sc{dim, op, bytes, group_collective_cost(kind, bytes, g, hw_)};
    plan_.collectives.push_back(sc);
    return {sc.cost.time, sc.cost.tier, sc.cost.channels, sc.cost.wire_bytes};
  }

  void price_collectives() {
    const double layer = t_.model.layer_params() / tp_;
    const double grad = dtype_bytes(t_.grad_reduce_dtype);
    const bool moe = t_.model.is_moe() && c_.moe.has_value();
    // A MoE layer's weights on this rank: those every rank holds, and its ep share of the routed experts.
    const double moe_dense = t_.model.moe_dense_params() / tp_, moe_routed = t_.model.routed_expert_params() / tp_ / ep_;
    const bool dense = !moe || t_.model.moe_layers() < t_.model.layers;  // only what some layer pays is listed
    if (fsdp_ > 1) {
      const GroupLayout g = layout({MeshDim::cp, MeshDim::ep, MeshDim::fsdp});
      const double shards = fsdp_, expert_shards = t_.expert_shard_ranks();
      if (dense) {
        const double w = gathered_bytes();
        gather_ = with_copy_in(price("fsdp", "all_gather", GroupOp::all_gather, layer * w, g), layer / shards, w);
        if (t_.fsdp_fp8_all_gather == Fp8AllGather::dynamic_scale) gather_ = with_dynamic_scales(gather_, layer / shards, g);
        reduce_ = price("fsdp", "reduce_scatter", GroupOp::reduce_scatter, layer * grad, g);
        copies_ = fsdp_copies(layer, grad, w);
        if (t_.fsdp_fp8_all_gather == Fp8AllGather::precomputed_scale)
          scales_ = price("fsdp", "all_reduce (fp8 weight amaxes, once per step)", GroupOp::all_reduce,
                          4.0 * linear_weights() * static_cast<double>(t_.model.layers), g);
      }
      if (moe) {
        const GroupLayout x = layout({MeshDim::cp, MeshDim::fsdp});
        gather_moe_ = with_copy_in(add(price("fsdp", "all_gather (MoE layer, shared weights)", GroupOp::all_gather, moe_dense * e_, g),
                                       price("fsdp", "all_gather (MoE layer, routed experts)", GroupOp::all_gather, moe_routed * e_, x)),
                                   moe_dense / shards + moe_routed / expert_shards, e_);
        reduce_moe_ = add(price("fsdp", "reduce_scatter (MoE layer, shared weights)", GroupOp::reduce_scatter, moe_dense * grad, g),
                          price("fsdp", "reduce_scatter (MoE layer, routed experts)", GroupOp::reduce_scatter, moe_routed * grad, x));
        copies_moe_ = fsdp_copies(moe_dense + moe_routed, grad, e_);
      }
      // The embedding and output layer are their own FSDP units in torchtitan; charged with the first and last
      // layer, or alone where a pipeline chunk holds nothing else.
      const double extra = t_.model.embedding_params() / tp_;
      gather_edge_ = with_copy_in(price("fsdp", "all_gather (embedding or output layer)", GroupOp::all_gather, extra * e_, g), extra / shards, e_);
      reduce_edge_ = price("fsdp", "reduce_scatter (embedding or output layer)", GroupOp::reduce_scatter, extra * grad, g);
      copies_edge_ = fsdp_copies(extra, grad, e_);
    }
    if (dp_ > 1) {
      const GroupLayout g = layout({MeshDim::dp});
      if (dense) all_reduce_ = price("dp", "all_reduce", GroupOp::all_reduce, layer / fsdp_ * grad, g);
      if (moe)
        all_reduce_moe_ = price("dp", "all_reduce (MoE layer)", GroupOp::all_reduce,
                                (moe_dense / fsdp_ + moe_routed / t_.expert_shard_ranks()) * grad, g);
      all_reduce_edge_ = price("dp", "all_reduce (embedding or output layer)", GroupOp::all_reduce,
                               t_.model.embedding_params() / tp_ / fsdp_ * grad, g);
    }
    if (pp_ > 1) {
      const double act = static_cast<double>(t_.rank_tokens()) / tp_ * static_cast<double>(t_.model.hidden) * e_;
      send_ = price("pp", "send_recv", GroupOp::send_recv, act, layout({MeshDim::pp}));
    }
    // CP's K/V exchanges and EP's all-to-alls run inside the layers (layer_costs); listed as charged.
    for (const auto& x : c_.cp_collectives) plan_.collectives.push_back(x);
    if (moe)
      for (const auto& x : c_.moe->collectives) plan_.collectives.push_back(x);
  }

  // Before each all-gather, on FSDP2's copy-in stream, the local shard is cast from the fp32
  // master to the parameter dtype (or fp8) and copied into the all-gather input
  // (_get_param_all_gather_inputs, all_gather_copy_in): charged with the all-gather on its stream.
  // `gathered`: bytes per gathered element (the parameter dtype's, or fp8's).
  Charge with_copy_in(Charge c, double shard_params, double gathered) const {
    c.work += kernels_alone({{"fsdp.cast", aten_convert(shard_params, 4, gathered)},
                             {"fsdp.copy_in", ElementwiseOp{gathered * shard_params, gathered * shard_params}}},
                            hw_);
    return c;
  }

  // What a decoder layer's FSDP all-gather moves per element: its weights are all linears,
  // cast to fp8 before the gather under FSDP2's fp8 all-gather.
  double gathered_bytes() const { return t_.weights_gathered_in_fp8() ? dtype_bytes(Dtype::fp8) : e_; }
  // A decoder layer's linear weights: Q, K, V, output; the FFN's up projections and down.
  double linear_weights() const { return 4.0 + t_.model.ffn_up_projections() + 1.0; }

  // Dynamic scaling without precomputed scales (torchao's hp_tensor_to_float8_dynamic with
  // reduce_amax): before its cast each weight's shard is reduced to its absolute maximum,
  // and that scalar all-reduced (MAX) over the FSDP group, one weight after another on the
  // all-gather's stream.
  Charge with_dynamic_scales(Charge c, double shard_params, const GroupLayout& g) {
    const double per_weight = shard_params / linear_weights();
    const Charge amax = price("fsdp", "all_reduce (fp8 weight amax, per weight and all-gather)", GroupOp::all_reduce, 4, g);
    std::vector<std::pair<std::string, OpPayload>> passes;
    for (int i = 0; i < static_cast<int>(linear_weights()); ++i) passes.emplace_back("fsdp.fp8_amax", ElementwiseOp{4 * per_weight, 4});
    c.work += kernels_alone(passes, hw_) + static_cast<Tick>(linear_weights()) * amax.work;
    return c;
  }

  FsdpCopies fsdp_copies(double local_params, double grad_bytes, double gathered) const {
    return {kernels_alone({{"fsdp.copy_out", ElementwiseOp{gathered * local_params, gathered * local_params}}}, hw_),
            kernels_alone({{"fsdp.grad_copy_in", aten_convert(local_params, e_, grad_bytes)}}, hw_)};
  }

  // The copies a layer's pass runs on the compute stream: copy-out after its all-gather,
  // chunk_cat before its reduce-scatter.
  // (The output layer that the chunked loss syncs itself has both in every forward, none in
  // backward; the output layer kept gathered from its forward is not gathered for backward.)
  Tick fsdp_copy_time(int layer, bool moe, bool gathered, bool reduced, bool forward) const {
    const FsdpCopies& c = moe ? copies_moe_ : copies_;
    Tick t = layer < 0 ? 0 : (gathered ? c.copy_out : 0) + (reduced ? c.grad_copy_in : 0);
    const bool own = loss_syncs_output(layer);
    const bool edge_gathered = own ? forward : gathered && (forward || !output_kept(layer));
    if (edge(layer)) t += (edge_gathered ? copies_edge_.copy_out : 0) + ((own ? forward : reduced) ? copies_edge_.grad_copy_in : 0);
    return t;
  }
  bool loss_syncs_output(int layer) const { return loss_syncs_output_ && with_output(layer); }
  // What PyTorch's pipelining adds to (or, for a chunk's first layer, takes from) the
  // activations a unit of a chunk holds per microbatch until its backward: the chunk's output,
  // kept in fwd_cache, and, not counted twice, its input, which is the receive buffer.
  double boundary(int chunk, std::size_t index, std::size_t units, bool decoder) const {
    double b = 0;
    if (index + 1 == units && chunk < t_.chunks() - 1) b += boundary_bytes_;
    if (index == 0 && chunk > 0 && decoder) b -= boundary_bytes_;
    return b;
  }
  // The final norm and output layer are an FSDP unit that is not resharded after forward
  // (torchtitan fsdp.py, b5bcd76: reshard_after_forward only under the "always" policy; at
  // 9dec370 they were the root module's, which FSDP2 never reshards after forward): its
  // backward finds it gathered.
  bool output_kept(int layer) const { return with_output(layer) && !with_embedding(layer); }

  int comm(int stage, StepStream stream, const std::string& dim, std::string name, const Charge& ch, std::vector<int> deps) {
    GroupCollectiveCost cost;
    cost.time = ch.work, cost.tier = ch.tier, cost.channels = ch.sms, cost.wire_bytes = ch.wire_bytes;
    StepTask task = communication_task(stream, std::move(name), dim, cost, std::move(deps));
    task.stage = stage;
    return plan_.program.add(std::move(task));
  }

  // `tp_bytes`: what the pass sends on each link tier (its TP collectives). `mix`: what
  // `work` is spent on (an index into the program's mixes; -1: "other").
  int compute(int stage, std::string name, Tick work, double activation, std::vector<int> deps, int mix, int phases = -1,
              const PerTier& tp_bytes = {}) {
    // Blocking pipeline communication: the stage's next pass waits for its last send.
    if (unwaited_send_ >= 0) deps.push_back(std::exchange(unwaited_send_, -1));
    StepTask task;
    task.stage = stage;
    task.phases = phases;
    task.mix = mix;
    task.name = std::move(name);
    task.work = work;
    task.link_bytes = tp_bytes;
    if (work > 0) {
      const auto load = [&](double bytes, double bytes_per_ps) {
        return bytes > 0 && bytes_per_ps > 0 ? std::min(1.0, bytes / (static_cast<double>(work) * bytes_per_ps)) : 0.0;
      };
      task.link_load = {load(tp_bytes.nvlink, hw_.fabric.nvlink.bytes_per_ps), load(tp_bytes.nic, hw_.cluster.nic.bytes_per_ps)};
    }
    task.activation_bytes = activation;
    task.deps = std::move(deps);
    const int id = plan_.program.add(std::move(task));
    history_.push_back(id);
    return id;
  }

  // The index of `kinds` as fractions in the program's mixes (one entry per distinct mix).
  int mix_of(const TimeByKind& kinds) {
    const Tick sum = total(kinds);
    if (sum <= 0) return -1;
    WorkMix mix;
    for (const auto& [kind, ps] : kinds)
      if (ps > 0) mix.emplace_back(kind, static_cast<double>(ps) / static_cast<double>(sum));
    auto [it, fresh] = mix_index_.try_emplace(mix, static_cast<int>(plan_.program.mixes.size()));
    if (fresh) plan_.program.mixes.push_back(std::move(mix));
    return it->second;
  }

  // The mix of `layer`'s forward or backward pass: its decoder layer's kinds, with the
  // embedding, output layer and FSDP copies it carries; one per distinct pass shape.
  int pass_mix(PipelinePass pass, int layer, bool gathered, bool reduced) {
    const bool moe = is_moe(layer), decoder = layer >= 0, forward = pass == PipelinePass::forward;
    const auto key = std::make_tuple(static_cast<int>(pass), decoder, moe, with_embedding(layer), with_output(layer), gathered, reduced);
    if (auto it = pass_mix_.find(key); it != pass_mix_.end()) return it->second;
    TimeByKind kinds;
    if (decoder) kinds = forward ? (moe ? c_.moe->forward_kinds : c_.forward_kinds)
                                 : (moe ? c_.moe->backward_kinds + c_.moe->recompute_kinds : c_.backward_kinds + c_.recompute_kinds);
    const Tick output = with_output(layer) ? (forward ? c_.output_forward : c_.output_backward) : 0;
    kinds += TimeByKind{{"embedding", with_embedding(layer) ? (forward ? c_.embedding_forward : c_.embedding_backward) : 0},
                        {"output layer and loss", output},
                        {"fsdp copies", fsdp_copy_time(layer, moe, gathered, reduced, forward)}};
    if (pass == PipelinePass::backward_input) {
      // The weight gradients' GEMMs go to the other half; the embedding's backward is all weight gradient.
      if (decoder) {
        // Out of the GEMMs, then (a MoE layer) out of the routed experts.
        const Tick w = moe ? c_.moe->backward_weight : c_.backward_weight, from_gemm = std::min(w, kinds["gemm"]);
        kinds["gemm"] -= from_gemm;
        if (moe) kinds["routed experts"] = std::max<Tick>(0, kinds["routed experts"] - (w - from_gemm));
      }
      kinds["embedding"] = 0;
      kinds["output layer and loss"] = with_output(layer) ? output - c_.output_backward_weight : 0;
    } else if (pass == PipelinePass::backward_weight) {
      kinds = {{"gemm", !decoder ? 0 : moe ? c_.moe->backward_weight : c_.backward_weight},
               {"embedding", with_embedding(layer) ? c_.embedding_backward : 0},
               {"output layer and loss", with_output(layer) ? c_.output_backward_weight : 0},
               {"fsdp copies", fsdp_copy_time(layer, moe, gathered, reduced, false)}};
      if (decoder) kinds += moe ? c_.moe->recompute_kinds : c_.recompute_kinds;
    }
    return pass_mix_[key] = mix_of(kinds);
  }

  // A backward pass's own work (without FSDP copies): the whole backward with its
  // recomputation, or its input-gradient half (less the weight-gradient GEMMs), or its
  // weight-gradient half (those GEMMs, the embedding's gradient, and the recomputation again:
  // weight_gradients.hpp).
  Tick backward_work(int layer, PipelinePass pass) const {
    const bool moe = is_moe(layer), decoder = layer >= 0;
    const Tick layer_all = !decoder ? 0 : moe ? c_.moe->backward + c_.moe->recompute : c_.backward + c_.recompute;
    const Tick embedding = with_embedding(layer) ? c_.embedding_backward : 0, output = with_output(layer) ? c_.output_backward : 0;
    const Tick weight_gemms = !decoder ? 0 : moe ? c_.moe->backward_weight : c_.backward_weight;
    const Tick layer_weight = !decoder ? 0 : weight_gemms + (moe ? c_.moe->recompute : c_.recompute);
    const Tick output_weight = with_output(layer) ? c_.output_backward_weight : 0;
    switch (pass) {
      case PipelinePass::backward_input: return layer_all - weight_gemms + output - output_weight;
      case PipelinePass::backward_weight: return layer_weight + embedding + output_weight;
      default: return layer_all + embedding + output;
    }
  }

  void sent(int send) {
    if (t_.pp_p2p_blocking) unwaited_send_ = send;
  }

  // A chunk's output (activations forward, gradients backward) handed to chunk `to`: sent to
  // the rank that runs it, or, where the same rank runs it (the turn of a V schedule), passed
  // on in memory: the receiving pass waits for `last` alone.
  void handoff(int rank, int to, std::int64_t k, StepStream stream, std::string name, int last) {
    if (chunk_rank(t_.schedule, pp_, to) == rank) {
      sends_[k] = last;
      return;
    }
    sent(sends_[k] = comm(rank, stream, "pp", std::move(name), send_, {last}));
  }

  // FSDP2 keeps at most two layers gathered: the next all-gather waits for the layer two back.
  std::vector<int> gather_window() const {
    if (history_.size() < 2) return {};
    return {history_[history_.size() - 2]};
  }

  // Whether `layer`'s pass carries the embedding or the output layer (and their FSDP unit).
  bool with_embedding(int layer) const { return layer == kEmbeddingAlone || (layer == 0 && !embedding_alone_); }
  bool with_output(int layer) const { return layer == kOutputAlone || (layer == t_.model.layers - 1 && !output_alone_); }
  bool edge(int layer) const { return with_embedding(layer) || with_output(layer); }
  // The FSDP charge of `layer`'s unit, with the embedding's or output's where it carries them.
  Charge unit(int layer, const Charge& dense, const Charge& moe, const Charge& edge_unit) const {
    if (layer < 0) return edge_unit;
    const Charge& c = is_moe(layer) ? moe : dense;
    return edge(layer) ? add(c, edge_unit) : c;
  }
  // What task names call a pass's unit: "layer3", or "embedding" / "output" standing alone.
  static std::string unit_name(int layer) {
    if (layer == kEmbeddingAlone) return "embedding";
    if (layer == kOutputAlone) return "output";
    return fmt::format("layer{}", layer);
  }

  void build_rank(int rank) {
    history_.clear();
    unwaited_send_ = -1;
    const int last_chunk = t_.chunks() - 1;
    const bool keep = pp_ > 1;  // gathered parameters kept from forward to backward
    const double dense_act = activation_bytes_per_layer(t_, t_.checkpoint, e_, false);
    const double moe_act = activation_bytes_per_layer(t_, t_.checkpoint, e_, true);
    std::map<int, bool> gathered;
    std::map<int, int> backwards_seen;
    int last_reduce = -1, last_all_reduce = -1;
    for (const PipelineWork& w : pipeline_order(t_.schedule, pp_, t_.virtual_stages, t_.microbatches, rank)) {
      const auto& layers = plan_.layers_of_chunk[static_cast<std::size_t>(w.chunk)];
      const std::string mb = fmt::format("mb{}", w.microbatch);
      int last = -1;
      if (w.forward()) {
        for (std::size_t i = 0; i < layers.size(); ++i) {
          const int l = layers[i];
          std::vector<int> deps;
          const bool moe = is_moe(l), decoder = l >= 0;
          const bool unit_gathered = fsdp_ > 1 && !(keep && gathered[l]);
          if (unit_gathered) {
            gathered[l] = true;
            deps.push_back(comm(rank, StepStream::fsdp_gather, "fsdp", "fsdp.all_gather." + unit_name(l), unit(l, gather_, gather_moe_, gather_edge_),
                                gather_window()));
          } else if (loss_syncs_output(l)) {
            deps.push_back(comm(rank, StepStream::fsdp_gather, "fsdp", "fsdp.all_gather.output.loss." + mb, gather_edge_, gather_window()));
          }
          const Tick work = (!decoder ? 0 : moe ? c_.moe->forward : c_.forward) + (with_embedding(l) ? c_.embedding_forward : 0) +
                            (with_output(l) ? c_.output_forward : 0) + fsdp_copy_time(l, moe, unit_gathered, false, true);
          const PerTier tp_bytes = (!decoder ? PerTier{} : moe ? c_.moe->forward_tp_bytes : c_.forward_tp_bytes) +
                                   (with_output(l) ? c_.output_forward_tp_bytes : PerTier{});
          const double act = (!decoder ? 0 : moe ? moe_act : dense_act) + boundary(w.chunk, i, layers.size(), decoder);
          last = compute(rank, fmt::format("{}.forward.{}", unit_name(l), mb), work, act, deps,
                         pass_mix(PipelinePass::forward, l, unit_gathered, false), !decoder ? -1 : moe ? 2 : 0, tp_bytes);
          if (loss_syncs_output(l)) {
            last_reduce = comm(rank, StepStream::fsdp_reduce, "fsdp", "fsdp.reduce_scatter.output.loss." + mb, reduce_edge_, {last});
            if (dp_ > 1) last_all_reduce = comm(rank, StepStream::dp_reduce, "dp", "dp.all_reduce.output.loss." + mb, all_reduce_edge_, {last_reduce});
          }
          if (decoder) ++(moe ? plan_.moe_passes : plan_.dense_passes).forward;
          if (i == 0 && w.chunk > 0) pending_.push_back({last, key(w.chunk - 1, w.microbatch, true)});
        }
        if (w.chunk < last_chunk) handoff(rank, w.chunk + 1, key(w.chunk, w.microbatch, true), StepStream::pp_forward,
                                          fmt::format("pp.send.activations.chunk{}.{}", w.chunk, mb), last);
      } else {
        // A whole backward, or (zero bubble) its input-gradient or weight-gradient half: the
        // input half sends the gradient on, the weight half makes the gradients FSDP and DP reduce.
        const bool input = w.pass != PipelinePass::backward_weight, weight = w.pass != PipelinePass::backward_input;
        const bool final_backward = weight && ++backwards_seen[w.chunk] == t_.microbatches;
        const char* pass = w.pass == PipelinePass::backward ? "backward" : input ? "backward_input" : "backward_weight";
        for (std::size_t i = layers.size(); i-- > 0;) {
          const int l = layers[i];
          std::vector<int> deps;
          const bool moe = is_moe(l), decoder = l >= 0;
          if (input && fsdp_ > 1 && !keep && l != kOutputAlone)
            deps.push_back(comm(rank, StepStream::fsdp_gather, "fsdp", "fsdp.all_gather." + unit_name(l) + ".backward",
                                unit(l, gather_, gather_moe_, output_kept(l) ? Charge{} : gather_edge_), gather_window()));
          // (Nothing left to reduce in the output layer alone whose chunked loss reduced it.)
          const bool reduces = weight && fsdp_ > 1 && (!keep || final_backward) && !(l == kOutputAlone && loss_syncs_output(l));
          const Tick work = backward_work(l, w.pass) + fsdp_copy_time(l, moe, !deps.empty(), reduces, false);
          // The weight half sends what its recomputation does (the forward's TP collectives under full checkpointing).
          const PerTier tp_bytes = !decoder ? (input && with_output(l) ? c_.output_backward_tp_bytes : PerTier{})
                                   : !input ? (moe ? c_.moe->recompute_tp_bytes : c_.recompute_tp_bytes)
                                            : (moe ? c_.moe->backward_tp_bytes + c_.moe->recompute_tp_bytes : c_.backward_tp_bytes + c_.recompute_tp_bytes) +
                                                  (with_output(l) ? c_.output_backward_tp_bytes : PerTier{});
          // Activations are freed once the weight gradients are taken; a split backward keeps
          // every linear's output gradient from its input half to its weight half.
          const double act = !decoder ? 0 : moe ? moe_act : dense_act;
          const double kept = moe ? kept_for_moe_weights_ : kept_for_weights_;
          const double freed = (!decoder                              ? 0
                                : w.pass == PipelinePass::backward ? -act
                                : input                            ? kept
                                                                   : -(act + kept)) -
                               (input ? boundary(w.chunk, i, layers.size(), decoder) : 0);
          last = compute(rank, fmt::format("{}.{}.{}", unit_name(l), pass, mb), work, freed, deps,
                         pass_mix(w.pass, l, !deps.empty(), reduces), !decoder || !input ? -1 : moe ? 3 : 1, tp_bytes);
          if (decoder && input) ++(moe ? plan_.moe_passes : plan_.dense_passes).backward;
          if (decoder && !input) ++(moe ? plan_.moe_passes : plan_.dense_passes).weight_halves;
          if (input && i + 1 == layers.size() && w.chunk < last_chunk) pending_.push_back({last, key(w.chunk + 1, w.microbatch, false)});
          if (!weight) continue;
          int grads_ready = last;
          if (reduces)
            grads_ready = last_reduce = comm(rank, StepStream::fsdp_reduce, "fsdp", "fsdp.reduce_scatter." + unit_name(l),
                                             unit(l, reduce_, reduce_moe_, loss_syncs_output(l) ? Charge{} : reduce_edge_), {last});
          // DDP reduces once, after the last microbatch; HSDP after every reduce-scatter.
          if (dp_ > 1 && ((fsdp_ > 1 && grads_ready != last) || (fsdp_ == 1 && final_backward))) {
            last_all_reduce = comm(rank, StepStream::dp_reduce, "dp", "dp.all_reduce." + unit_name(l),
                                   unit(l, all_reduce_, all_reduce_moe_, loss_syncs_output(l) ? Charge{} : all_reduce_edge_), {grads_ready});
          }
        }
        if (input && w.chunk > 0) handoff(rank, w.chunk - 1, key(w.chunk, w.microbatch, false), StepStream::pp_backward,
                                          fmt::format("pp.send.gradients.chunk{}.{}", w.chunk, mb), last);
      }
    }
    std::vector<int> deps;
    if (last_reduce >= 0) deps.push_back(last_reduce);
    if (last_all_reduce >= 0) deps.push_back(last_all_reduce);
    const Tick step = optimizer_step_time(hw_, plan_.stages[static_cast<std::size_t>(rank)].shard, t_.optimizer);
    const int optimizer = compute(rank, "optimizer.step", step, 0, deps, mix_of({{"optimizer", step}}));
    if (t_.fsdp_fp8_all_gather == Fp8AllGather::precomputed_scale && t_.weights_gathered_in_fp8()) precompute_scales(rank, optimizer);
  }

  // torchao's precompute_float8_dynamic_scale_for_fsdp after the optimizer step: the
  // absolute maximum of every fp8 weight's shard (one foreach pass over them), then one
  // all-reduce of all the maxima over the FSDP group; the next step's casts use them.
  void precompute_scales(int rank, int optimizer) {
    const double shard = plan_.stages[static_cast<std::size_t>(rank)].shard - plan_.stages[static_cast<std::size_t>(rank)].edge_shard;
    const Tick amax = kernels_alone({{"fp8.amax", ElementwiseOp{4 * shard, 4 * linear_weights()}}}, hw_);
    const int pass = compute(rank, "fp8.precompute_scales.amax", amax, 0, {optimizer}, mix_of({{"fp8 scales", amax}}));
    comm(rank, StepStream::fsdp_reduce, "fsdp", "fsdp.all_reduce.fp8_scales", scales_, {pass});
  }

  // Backward passes start with the recomputation checkpointing adds (full: the forward again).
  void phase_templates() {
    const auto backward = [&](const std::vector<LayerPhase>& f, const std::vector<LayerPhase>& b, Tick recompute) {
      std::vector<LayerPhase> out = t_.checkpoint == Checkpointing::full ? f : std::vector<LayerPhase>{};
      for (LayerPhase p : b) {
        p.start += recompute;
        out.push_back(std::move(p));
      }
      return out;
    };
    auto& tpl = plan_.phase_templates;
    tpl = {c_.forward_phases, backward(c_.forward_phases, c_.backward_phases, c_.recompute)};
    if (c_.moe) {
      tpl.push_back(c_.moe->forward_phases);
      tpl.push_back(backward(c_.moe->forward_phases, c_.moe->backward_phases, c_.moe->recompute));
    }
  }

  bool is_moe(int layer) const { return layer >= 0 && c_.moe.has_value() && t_.model.moe_layer(layer); }

  // A stage's parameters on one of its ranks after TP and EP, and that rank's FSDP shard; and
  // its largest layer on this rank (what FSDP gathers at a time).
  StageParams stage_params(int rank) const {
    StageParams p;
    const double e = t_.model.embedding_params();
    for (int c = 0; c < t_.chunks(); ++c) {
      if (chunk_rank(t_.schedule, pp_, c) != rank) continue;
      const int receives = (c > 0 ? 1 : 0) + (c + 1 < t_.chunks() ? 1 : 0);  // activations from before, gradients from after
      p.pipeline_buffers += receives * t_.microbatches * boundary_bytes_;
      if (boundary_bytes_ > 0 && c > 0 && plan_.layers_of_chunk[static_cast<std::size_t>(c)].front() == kOutputAlone) p.output_input_received = true;
      for (int l : plan_.layers_of_chunk[static_cast<std::size_t>(c)]) {
        double everyone = l < 0 ? 0 : t_.model.layer_params(), routed = 0;
        if (l >= 0 && t_.model.moe_layer(l)) everyone = t_.model.moe_dense_params(), routed = t_.model.routed_expert_params() / ep_;
        p.largest_layer = std::max(p.largest_layer, (everyone + routed) / tp_);
        double edge = 0;
        if (with_embedding(l)) edge += e;  // token embedding
        if (with_output(l)) edge += e;     // output projection (untied)
        everyone += edge;
        p.edge += edge / tp_;
        p.edge_shard += edge / tp_ / fsdp_;
        p.local += (everyone + routed) / tp_;
        p.shard += everyone / tp_ / fsdp_ + routed / tp_ / t_.expert_shard_ranks();
      }
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
  int pp_ = 1, tp_ = 1, fsdp_ = 1, dp_ = 1, ep_ = 1;
  Charge gather_, reduce_, gather_edge_, reduce_edge_, all_reduce_, all_reduce_edge_, send_;
  Charge gather_moe_, reduce_moe_, all_reduce_moe_;
  Charge scales_;  // precomputed fp8 scales: the all-reduce of every weight's amax
  FsdpCopies copies_, copies_moe_, copies_edge_;
  StepPlan plan_;
  std::vector<int> history_;
  int unwaited_send_ = -1;  // blocking p2p: the send the stage's next pass waits for
  double kept_for_weights_ = 0, kept_for_moe_weights_ = 0;  // a split backward: what a (MoE) layer keeps from its input half to its weight half
  // Entries of layers_of_chunk for a first or last chunk with no decoder layer.
  static constexpr int kEmbeddingAlone = -1, kOutputAlone = -2;
  bool embedding_alone_ = false, output_alone_ = false;
  bool loss_syncs_output_ = false;  // the chunked loss gathers and reduces the output layer every microbatch
  double boundary_bytes_ = 0;       // PyTorch's pipelining: one microbatch's activation between chunks (0 otherwise)
  std::map<std::int64_t, int> sends_;
  std::map<WorkMix, int> mix_index_;
  std::map<std::tuple<int, bool, bool, bool, bool, bool, bool>, int> pass_mix_;
  std::vector<std::pair<int, std::int64_t>> pending_;
};

}  // namespace

StepPlan plan_step(const TrainingStepSpec& t, const LayerCosts& c, const HardwareSpec& hw, Dtype dtype) {
  return ProgramBuilder(t, c, hw, dtype).build();
}

}  // namespace tpsim
