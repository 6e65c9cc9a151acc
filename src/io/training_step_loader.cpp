#include "tpsim/io/training_step_loader.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tpsim/cost/attention_cost.hpp"
#include "tpsim/io/model_loader.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/step/group_layout.hpp"

namespace tpsim {

namespace {

MeshShape parse_mesh(const ObjectReader& w, std::int64_t gpus) {
  const ObjectReader m = w.object("mesh", {"dp", "fsdp", "tp", "pp", "cp", "ep"});
  MeshShape mesh;
  for (MeshDim d : kAllMeshDims) {
    const std::string key(mesh_dim_name(d));
    if (!m.has(key)) continue;
    const std::int64_t v = m.positive_int(key);
    if (v > kMaxClusterGpus) fail_at(m.child_path(key), fmt::format("{} is more than the limit of {} GPUs", v, kMaxClusterGpus));
    mesh.sizes[static_cast<int>(d)] = static_cast<int>(v);
  }
  if (mesh.gpus() != gpus) {
    std::vector<std::string> parts;
    for (MeshDim d : kAllMeshDims)
      if (mesh.size(d) > 1) parts.push_back(fmt::format("{} {}", mesh_dim_name(d), mesh.size(d)));
    const std::string count = mesh.gpus() > kMaxClusterGpus ? fmt::format("more than {}", kMaxClusterGpus) : std::to_string(mesh.gpus());
    fail_at(m.path(), fmt::format("the mesh ({}) has {} GPUs, but gpus is {}", parts.empty() ? "all 1" : fmt::format("{}", fmt::join(parts, " x ")),
                                  count, gpus));
  }
  if (w.has("mesh_order")) {
    const Json& order = w.array("mesh_order");
    std::vector<MeshDim> listed;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::string p = fmt::format("{}[{}]", w.child_path("mesh_order"), i);
      const std::string name = as_string(order[i], p);
      const auto d = parse_mesh_dim(name);
      if (!d) {
        std::vector<std::string> names;
        for (MeshDim x : kAllMeshDims) names.emplace_back(mesh_dim_name(x));
        std::string msg = fmt::format("unknown mesh dimension \"{}\"", name);
        if (auto s = closest_match(name, names)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
        else msg += fmt::format(" (known: {})", fmt::join(names, ", "));
        fail_at(p, msg);
      }
      if (std::find(listed.begin(), listed.end(), *d) != listed.end()) fail_at(p, fmt::format("\"{}\" is listed twice", name));
      listed.push_back(*d);
    }
    for (MeshDim d : kAllMeshDims)
      if (mesh.size(d) > 1 && std::find(listed.begin(), listed.end(), d) == listed.end())
        fail_at(w.child_path("mesh_order"), fmt::format("does not place \"{}\" (size {}); list every dimension larger than 1", mesh_dim_name(d),
                                                        mesh.size(d)));
    // Dimensions of size 1 not listed go outermost: they change no placement.
    for (MeshDim d : kAllMeshDims)
      if (std::find(listed.begin(), listed.end(), d) == listed.end()) listed.push_back(d);
    mesh.order = listed;
  }
  return mesh;
}

template <typename E>
E parse_choice(const ObjectReader& w, const std::string& key, E fallback, std::initializer_list<std::pair<const char*, E>> choices) {
  if (!w.has(key)) return fallback;
  const std::string v = w.string(key);
  std::vector<std::string> names;
  for (const auto& [name, e] : choices) {
    if (v == name) return e;
    names.emplace_back(name);
  }
  std::string msg = fmt::format("unknown value \"{}\"", v);
  if (auto s = closest_match(v, names)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
  else msg += fmt::format(" (one of: {})", fmt::join(names, ", "));
  fail_at(w.child_path(key), msg);
}

// `expert_load`: one number >= 0 per expert, its relative share of the token slots; each
// expert can take each token once, so no share may pass 1 / top_k.
std::vector<double> parse_expert_load(const ObjectReader& w, const ModelShape& md) {
  const std::string path = w.child_path("expert_load");
  if (!md.is_moe()) fail_at(path, fmt::format("{} has no experts", md.name));
  const Json& v = w.at("expert_load");
  if (!v.is_array() || v.size() != static_cast<std::size_t>(md.moe.experts))
    fail_at(path, fmt::format("must be an array of {} numbers (one per expert), got {}", md.moe.experts,
                              v.is_array() ? fmt::format("{} numbers", v.size()) : std::string(v.type_name())));
  std::vector<double> share;
  double sum = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number() || !std::isfinite(v[i].get<double>()) || v[i].get<double>() < 0)
      fail_at(fmt::format("{}[{}]", path, i), fmt::format("must be a number >= 0, got {}", v[i].dump()));
    share.push_back(v[i].get<double>());
    sum += share.back();
  }
  if (!(sum > 0) || !std::isfinite(sum)) fail_at(path, "needs a positive, finite total");
  for (std::size_t i = 0; i < share.size(); ++i) {
    share[i] /= sum;
    if (share[i] > 1.0 / static_cast<double>(md.moe.top_k) + 1e-12)
      fail_at(fmt::format("{}[{}]", path, i),
              fmt::format("gives this expert {:.3g} of the token slots, more than every token once (1/top_k = {:.3g})", share[i],
                          1.0 / static_cast<double>(md.moe.top_k)));
  }
  return share;
}

void check_divisibility(const TrainingStepSpec& t, const ObjectReader& w) {
  const int tp = t.mesh.size(MeshDim::tp), pp = t.mesh.size(MeshDim::pp);
  const std::string mp = w.child_path("model");
  const auto& md = t.model;
  if (md.heads % tp != 0) fail_at(mp + ".heads", fmt::format("{} attention heads do not divide over tp {}", md.heads, tp));
  if (md.ffn_hidden % tp != 0) fail_at(mp + ".ffn_hidden", fmt::format("{} FFN columns do not divide over tp {}", md.ffn_hidden, tp));
  if (md.is_moe() && md.moe.expert_ffn_hidden % tp != 0)
    fail_at(mp + ".expert_ffn_hidden", fmt::format("{} expert FFN columns do not divide over tp {} (experts are sharded like the dense FFN)",
                                                   md.moe.expert_ffn_hidden, tp));
  if ((md.kv_heads >= tp && md.kv_heads % tp != 0) || (md.kv_heads < tp && tp % md.kv_heads != 0))
    fail_at(mp + ".kv_heads", fmt::format("{} KV heads can be neither split nor replicated evenly over tp {}", md.kv_heads, tp));
  if (md.kv_heads > md.heads) fail_at(mp + ".kv_heads", "more KV heads than attention heads");
  // torchtitan's generate_llm_fqn_per_model_part: every chunk holds at least one layer's
  // worth, and the first and last at least the embedding's and output's weight.
  const std::int64_t effective = md.layers + t.pp_embedding_weight + t.pp_output_weight, per_chunk = effective / t.chunks();
  if (per_chunk < 1)
    fail_at(mp, fmt::format("{} layers{} cannot fill {} pipeline stages x {} virtual stages", md.layers,
                            effective > md.layers ? fmt::format(" (and the embedding and output, counted as {})", effective - md.layers) : "",
                            pp, t.virtual_stages));
  if (t.pp_embedding_weight > per_chunk || t.pp_output_weight > per_chunk)
    fail_at(w.child_path(t.pp_embedding_weight > per_chunk ? "pp_first_stage_less_layers" : "pp_last_stage_less_layers"),
            fmt::format("is more than the {} layers a chunk holds ({} layers over {} chunks)", per_chunk, effective, t.chunks()));
  if (t.local_batch % t.microbatches != 0) {
    if (!w.has("microbatches"))  // the default, pp's degree: say so, and what to change
      fail_at(w.child_path("local_batch"), fmt::format("{} sequences do not split into pp = {} microbatches (the default): give a local batch "
                                                       "they divide, or \"microbatches\"", t.local_batch, t.microbatches));
    fail_at(w.child_path("microbatches"), fmt::format("{} microbatches do not divide the local batch of {} sequences", t.microbatches, t.local_batch));
  }
  // Context parallelism gives each rank two of 2 x cp equal chunks of every sequence
  // (the load balance of causal attention: chunk i and chunk 2cp-1-i).
  const int ep = t.mesh.size(MeshDim::ep);
  if (ep > 1 && !md.is_moe())
    fail_at(w.child_path("mesh") + ".ep", fmt::format("ep {} needs a mixture-of-experts model; {} has no experts", ep, md.name));
  if (ep > 1 && md.moe.experts % ep != 0)
    fail_at(w.child_path("mesh") + ".ep", fmt::format("{} experts do not divide over ep {}", md.moe.experts, ep));
  if (t.expert_load_skew > 0 && !md.is_moe()) fail_at(w.child_path("expert_load_skew"), fmt::format("{} has no experts", md.name));
  // An expert takes each token at most once: at most 1 / top_k of the token slots.
  if (md.is_moe()) {
    const double most = static_cast<double>(md.moe.experts) / static_cast<double>(md.moe.top_k) - 1;
    if (t.expert_load_skew > most + 1e-12)
      fail_at(w.child_path("expert_load_skew"),
              fmt::format("{} would give the busiest expert more tokens than there are (every token picks {} distinct experts of {}: "
                          "at most {:g})", t.expert_load_skew, md.moe.top_k, md.moe.experts, most));
  }
  const int cp = t.mesh.size(MeshDim::cp);
  if (cp > 1 && t.seq_len % (2 * cp) != 0)
    fail_at(w.child_path("seq_len"), fmt::format("{} tokens do not split into 2 x cp = {} equal chunks (context parallelism gives each "
                                                 "rank two chunks for the causal load balance)", t.seq_len, 2 * cp));
  // Sequence parallelism shards every microbatch's tokens (of this CP rank) over the TP group.
  if (t.rank_tokens() % tp != 0)
    fail_at(w.child_path("seq_len"), fmt::format("a microbatch of {} tokens{} does not divide over tp {}", t.rank_tokens(),
                                                 cp > 1 ? std::string(" per CP rank") : "", tp));
  // ChunkedLossWrapper splits the rank's tokens into equal chunks (torch._check: the
  // sequence length must be divisible by num_chunks).
  if (t.rank_tokens() % t.loss_chunks != 0)
    fail_at(w.child_path("loss_chunks"), fmt::format("{} chunks do not divide a microbatch's {} tokens{}", t.loss_chunks, t.rank_tokens(),
                                                     cp > 1 ? std::string(" per CP rank") : ""));
  if (t.schedule == PipelineSchedule::interleaved_1f1b) {
    if (t.virtual_stages < 2) fail_at(w.child_path("virtual_stages"), "interleaved 1F1B needs at least 2 virtual stages per rank");
    if (t.microbatches % pp != 0)
      fail_at(w.child_path("microbatches"),
              fmt::format("interleaved 1F1B runs microbatches in groups of pp: {} is not a multiple of pp {}", t.microbatches, pp));
  } else if (t.schedule == PipelineSchedule::interleaved_zero_bubble) {
    // ScheduleInterleavedZeroBubble's rounds: max(1, m / pp) of them, each as many microbatches.
    const int rounds = std::max(1, t.microbatches / pp);
    if (t.microbatches % rounds != 0)
      fail_at(w.child_path("microbatches"), fmt::format("zero bubble runs microbatches in {} rounds (microbatches / pp): {} is not a multiple of {}",
                                                        rounds, t.microbatches, rounds));
  } else if (t.schedule == PipelineSchedule::zbv_zero_bubble || t.schedule == PipelineSchedule::dualpipev) {
    if (t.virtual_stages != 2)
      fail_at(w.child_path("virtual_stages"), fmt::format("{} places exactly 2 chunks on each rank in a V, got {}",
                                                          pipeline_schedule_name(t.schedule), t.virtual_stages));
    if (t.schedule == PipelineSchedule::dualpipev && t.microbatches < 2 * pp)
      fail_at(w.child_path("microbatches"), fmt::format("DualPipeV needs at least as many microbatches as stages (2 x pp = {}), got {}",
                                                        2 * pp, t.microbatches));
  } else if (t.virtual_stages != 1) {
    fail_at(w.child_path("virtual_stages"), fmt::format("only the interleaved schedules have virtual stages (pp_schedule is \"{}\")",
                                                        pipeline_schedule_name(t.schedule)));
  }
  if (pp > 1 && t.schedule != PipelineSchedule::gpipe && t.microbatches < pp)
    fail_at(w.child_path("microbatches"), fmt::format("{} needs at least pp = {} microbatches to fill the pipeline, got {}",
                                                      pipeline_schedule_name(t.schedule), pp, t.microbatches));
  // The step's tasks, bounded before anything is built: per layer and microbatch a forward
  // and a backward, and with FSDP a gather for each and a reduce (about 200 bytes each).
  const double per_stage = static_cast<double>(md.layers) / pp + 1;
  const double tasks = per_stage * pp * t.microbatches * (t.mesh.size(MeshDim::fsdp) > 1 ? 5.0 : 2.0);
  if (tasks > kMaxStepTasks)
    fail_at(w.child_path("microbatches"), fmt::format("the step would have about {:.0f} tasks, more than {}: fewer microbatches or layers",
                                                      tasks, kMaxStepTasks));
  // Whole-model weights of a layer and the output projection must fit the GEMM bounds.
  check_gemm_fits(t.rank_tokens(), md.vocab, md.hidden, mp);
  check_gemm_fits(t.rank_tokens(), 2 * md.ffn_hidden, md.hidden, mp);
  // Attention's widest projection output: fused QKV, or MLA's per-head keys and values from the latent.
  const std::int64_t attention_out = md.is_mla() ? std::max(md.q_width(), md.heads * (md.head_dim - md.mla.rope_head_dim + md.v_head_dim()))
                                                 : md.q_width() + 2 * md.kv_width();
  check_gemm_fits(t.rank_tokens(), attention_out, md.hidden, mp);
  // A rank's routed token slots when every rank sends all of its tokens' slots to its experts.
  if (md.is_moe()) {
    const double slots = static_cast<double>(t.rank_tokens()) * static_cast<double>(md.moe.top_k) * ep;  // may pass int64
    if (slots * static_cast<double>(md.hidden) > kMaxMatrixElements)
      fail_at(mp, fmt::format("{:.3g} routed token slots of {} would be larger than any GPU memory holds (limit 2^36 elements)", slots,
                              md.hidden));
    check_gemm_fits(static_cast<std::int64_t>(slots), 2 * md.moe.expert_ffn_hidden, md.hidden, mp);
  }
}

// torchtitan's quantize.linear.float8.recipe_name ("tensorwise", "rowwise") and, for rowwise,
// which library runs its GEMMs (PyTorch's build decides: Blas.cpp takes cuBLAS from 12.9 on Hopper).
Fp8Recipe parse_fp8_recipe(const ObjectReader& w, const TrainingStepSpec& t) {
  Fp8Recipe r;
  r.scaling = parse_choice(w, "fp8_recipe", Fp8Scaling::tensorwise, {{"tensorwise", Fp8Scaling::tensorwise}, {"rowwise", Fp8Scaling::rowwise}});
  if (w.has("fp8_recipe") && t.linear_dtype != Dtype::fp8)
    fail_at(w.child_path("fp8_recipe"), "scales the operands of fp8 linears: it needs \"linear_dtype\": \"fp8\"");
  r.aten_rowwise_kernel = parse_choice(w, "fp8_rowwise_gemm", true, {{"aten", true}, {"cublas", false}});
  if (w.has("fp8_rowwise_gemm") && !r.rowwise())
    fail_at(w.child_path("fp8_rowwise_gemm"), "picks the kernel of rowwise-scaled GEMMs: it needs \"fp8_recipe\": \"rowwise\"");
  return r;
}

// torchtitan's enable_fsdp_float8_all_gather and precompute_float8_dynamic_scale_for_fsdp.
Fp8AllGather parse_fp8_all_gather(const ObjectReader& w, const TrainingStepSpec& t) {
  const bool gather = w.optional_bool("fsdp_fp8_all_gather").value_or(false);
  const bool precompute = w.optional_bool("fsdp_fp8_precompute_scale").value_or(false);
  if (precompute && !gather) fail_at(w.child_path("fsdp_fp8_precompute_scale"), "applies to \"fsdp_fp8_all_gather\": true only");
  if (!gather) return Fp8AllGather::off;
  if (t.linear_dtype != Dtype::fp8)
    fail_at(w.child_path("fsdp_fp8_all_gather"), "gathers the weights of fp8 linears: it needs \"linear_dtype\": \"fp8\"");
  // torchao's float8 training of grouped expert GEMMs is another recipe, not modelled.
  if (t.model.is_moe()) fail_at(w.child_path("fsdp_fp8_all_gather"), fmt::format("is not modelled for a model with experts ({})", t.model.name));
  // torchao's fp8 all-gather casts each weight with one scale (WeightWithDynamicFloat8CastTensor).
  if (t.fp8.rowwise()) fail_at(w.child_path("fsdp_fp8_all_gather"), "is tensorwise scaling's (one scale per weight): not with \"fp8_recipe\": \"rowwise\"");
  return precompute ? Fp8AllGather::precomputed_scale : Fp8AllGather::dynamic_scale;
}

// DeepEP's node forwarding, node-limited routing and fp8 dispatch (DeepSeek-V3's all-to-alls).
void parse_moe_all_to_all(const ObjectReader& w, TrainingStepSpec& t) {
  for (const char* key : {"moe_all_to_all", "moe_node_limit", "moe_dispatch_dtype", "expert_gemm"})
    if (w.has(key) && !t.model.is_moe()) fail_at(w.child_path(key), fmt::format("{} has no experts", t.model.name));
  t.moe_node_forwarding = parse_choice(w, "moe_all_to_all", false, {{"nccl", false}, {"deepep", true}});
  if (w.has("moe_node_limit")) {
    const std::int64_t m = w.positive_int("moe_node_limit");
    if (m > 4096) fail_at(w.child_path("moe_node_limit"), fmt::format("{} is more than the limit 4096", m));
    if (!t.moe_node_forwarding)
      fail_at(w.child_path("moe_node_limit"),
              "applies to \"moe_all_to_all\": \"deepep\" (NCCL's all-to-all sends every token slot on its own, whatever nodes they go to)");
    t.moe_node_limit = static_cast<int>(m);
  }
  t.moe_fp8_dispatch = parse_choice(w, "moe_dispatch_dtype", false, {{"activation", false}, {"fp8", true}});
  t.grouped_expert_gemm = parse_choice(w, "expert_gemm", false, {{"batched", false}, {"grouped_mm", true}});
  if (t.moe_fp8_dispatch && t.linear_dtype != Dtype::fp8)
    fail_at(w.child_path("moe_dispatch_dtype"), "\"fp8\" sends the inputs of fp8 expert GEMMs: it needs \"linear_dtype\": \"fp8\"");
}

// What a zero-bubble schedule needs: PyTorch runs it (torch.distributed.pipelining), whose
// zero-bubble schedules refuse compiled stage modules (ScheduleInterleavedZeroBubble at pytorch
// 1fd7abc2; both, and ZBV, through _check_torch_compile_compatibility later) and whose TP
// keeps the gathered input for the weight gradients.
void check_zero_bubble(const TrainingStepSpec& t, const ObjectReader& w) {
  if (!t.splits_backward() || t.mesh.size(MeshDim::pp) == 1) return;
  if (t.compile)
    fail_at(w.child_path("compile"), "PyTorch's zero-bubble schedules refuse stage modules that used torch.compile "
                                     "(_check_torch_compile_compatibility): say false or choose another pp_schedule");
  if (t.mesh.size(MeshDim::tp) > 1 && !t.tp_saves_gathered_input)
    fail_at(w.child_path("tp_weight_grad_input"), "zero bubble is PyTorch's schedule, and PyTorch TP keeps the gathered input its weight "
                                                  "gradients read: say \"saved\"");
}

}  // namespace

std::vector<std::string> training_step_keys() {
  return {"model", "seq_len", "local_batch", "mesh", "mesh_order", "activation_checkpoint", "pp_schedule", "microbatches",
          "virtual_stages", "linear_dtype", "compile", "elementwise", "norm", "cross_entropy", "optimizer", "loss_parallel", "loss_chunks", "sequence_parallel", "grad_reduce_dtype", "cp_method", "expert_load_skew", "expert_load",
          "moe_dispatch_chunks", "moe_all_to_all", "moe_node_limit", "moe_dispatch_dtype", "expert_gemm", "attention", "attention_dropout", "pp_p2p", "pp_runtime", "fsdp_fp8_all_gather", "fsdp_fp8_precompute_scale",
          "tp_fp8_all_gather", "fp8_recipe", "fp8_rowwise_gemm", "pp_first_stage_less_layers", "pp_last_stage_less_layers", "tp_weight_grad_input", "activation_layout"};
}

bool parse_tp_weight_grad_input(const ObjectReader& w) {
  return parse_choice(w, "tp_weight_grad_input", false, {{"regather", false}, {"saved", true}});
}

bool parse_activation_layout(const ObjectReader& w) {
  return parse_choice(w, "activation_layout", false, {{"sequence_first", false}, {"batch_first", true}});
}

AttentionChoice parse_attention_choice(const ObjectReader& w) {
  AttentionChoice a;
  a.impl = parse_choice(w, "attention", AttentionImpl::flash,
                        {{"flash", AttentionImpl::flash}, {"flash2", AttentionImpl::flash2}, {"cudnn", AttentionImpl::cudnn},
                         {"unfused", AttentionImpl::unfused}});
  if (w.has("attention_dropout")) {
    const Json& v = w.at("attention_dropout");
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() >= 1)
      fail_at(w.child_path("attention_dropout"), fmt::format("must be a probability in [0, 1), got {}", v.dump()));
    a.dropout = v.get<double>();
    // Flash attention's in-kernel dropout is not modelled; say so rather than ignore it.
    if (a.dropout > 0 && a.impl != AttentionImpl::unfused)
      fail_at(w.child_path("attention_dropout"), "is modelled for \"attention\": \"unfused\" only");
  }
  return a;
}

TrainingStepSpec parse_training_step(const ObjectReader& w, std::int64_t gpus) {
  TrainingStepSpec t;
  t.model = parse_model(w, true);
  t.seq_len = bounded_dimension(w, "seq_len");
  t.local_batch = w.positive_int("local_batch");
  if (t.local_batch > 1 << 20) fail_at(w.child_path("local_batch"), "more than 2^20 sequences per rank");
  t.mesh = parse_mesh(w, gpus);
  t.checkpoint = parse_choice(w, "activation_checkpoint", Checkpointing::none,
                              {{"none", Checkpointing::none}, {"selective", Checkpointing::selective},
                               {"selective_op", Checkpointing::selective_op}, {"full", Checkpointing::full}});
  t.schedule = parse_choice(w, "pp_schedule", PipelineSchedule::one_f_one_b,
                            {{"gpipe", PipelineSchedule::gpipe}, {"1f1b", PipelineSchedule::one_f_one_b},
                             {"interleaved_1f1b", PipelineSchedule::interleaved_1f1b},
                             {"interleaved_zero_bubble", PipelineSchedule::interleaved_zero_bubble},
                             {"zbv_zero_bubble", PipelineSchedule::zbv_zero_bubble}, {"dualpipev", PipelineSchedule::dualpipev}});
  const std::int64_t mb = w.positive_int_or("microbatches", t.mesh.size(MeshDim::pp));
  if (mb > 4096) fail_at(w.child_path("microbatches"), fmt::format("{} is more than the limit 4096", mb));
  t.microbatches = static_cast<int>(mb);
  const bool multi_chunk = t.schedule == PipelineSchedule::interleaved_1f1b || t.schedule == PipelineSchedule::interleaved_zero_bubble ||
                           t.schedule == PipelineSchedule::zbv_zero_bubble || t.schedule == PipelineSchedule::dualpipev;
  const std::int64_t vs = w.positive_int_or("virtual_stages", multi_chunk ? 2 : 1);
  if (vs > 64) fail_at(w.child_path("virtual_stages"), fmt::format("{} is more than the limit 64", vs));
  t.virtual_stages = static_cast<int>(vs);
  // Without a pipeline, microbatches are gradient accumulation when they divide the local
  // batch; a schedule, virtual stages, or microbatches that do not divide it are pipeline
  // settings with nothing to apply to (a note says so).
  t.pp_p2p_blocking = parse_choice(w, "pp_p2p", false, {{"async", false}, {"blocking", true}});
  // The runtime defaults to the one whose sends pp_p2p describes; PyTorch's never blocks.
  t.pp_torch_buffers = parse_choice(w, "pp_runtime", !t.pp_p2p_blocking, {{"torch", true}, {"megatron", false}});
  if (t.pp_torch_buffers && t.pp_p2p_blocking)
    fail_at(w.child_path("pp_runtime"), "\"torch\" sends asynchronously: PyTorch's pipelining has no blocking sends (use \"megatron\" with \"pp_p2p\": \"blocking\")");
  for (const auto& [key, weight] : {std::pair{"pp_first_stage_less_layers", &t.pp_embedding_weight}, std::pair{"pp_last_stage_less_layers", &t.pp_output_weight}}) {
    if (!w.has(key)) continue;
    const Json& v = w.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 64)
      fail_at(w.child_path(key), fmt::format("must be a whole number of layers from 0 to 64, got {}", v.dump()));
    *weight = static_cast<int>(v.get<std::int64_t>());
  }
  if (t.mesh.size(MeshDim::pp) == 1) {
    if (w.has("pp_schedule") || w.has("virtual_stages") || w.has("pp_p2p") || w.has("pp_runtime") || w.has("pp_first_stage_less_layers") ||
        w.has("pp_last_stage_less_layers") || t.local_batch % t.microbatches != 0)
      t.pipeline_settings_ignored = true;
    t.pp_embedding_weight = t.pp_output_weight = 0;
    if (t.local_batch % t.microbatches != 0) t.microbatches = 1;
    t.virtual_stages = 1;
    t.schedule = PipelineSchedule::one_f_one_b;
  }
  t.grad_reduce_dtype = parse_choice(w, "grad_reduce_dtype", Dtype::fp32, {{"fp32", Dtype::fp32}, {"bf16", Dtype::bf16}});
  if (w.has("linear_dtype")) {
    const std::string ld = w.string("linear_dtype");
    const auto d = parse_dtype(ld);
    if (!d) fail_at(w.child_path("linear_dtype"), fmt::format("unknown dtype \"{}\" (bf16, fp16, fp32 or fp8)", ld));
    t.linear_dtype = *d;
  }
  t.fp8 = parse_fp8_recipe(w, t);
  t.fsdp_fp8_all_gather = parse_fp8_all_gather(w, t);
  // torchtitan applies torchao's float8 TP styles with tensorwise scaling only
  // (enable_float8_tensorwise_tp); rowwise gathers bf16 and casts after.
  t.tp_fp8_all_gather = w.optional_bool("tp_fp8_all_gather").value_or(t.linear_dtype == Dtype::fp8 && !t.fp8.rowwise());
  if (t.tp_fp8_all_gather && t.linear_dtype != Dtype::fp8)
    fail_at(w.child_path("tp_fp8_all_gather"), "gathers the inputs of fp8 linears: it needs \"linear_dtype\": \"fp8\"");
  if (t.tp_fp8_all_gather && t.fp8.rowwise())
    fail_at(w.child_path("tp_fp8_all_gather"), "casts with one scale per tensor before the gather (torchao's float8 TP): not with \"fp8_recipe\": \"rowwise\"");
  t.compile = w.optional_bool("compile").value_or(false);
  t.aten_elementwise = parse_choice(w, "elementwise", false, {{"fused", false}, {"aten", true}});
  t.fused_norm = parse_choice(w, "norm", false, {{"aten", false}, {"fused", true}});
  if (w.has("norm") && !t.aten_elementwise)
    fail_at(w.child_path("norm"), "says how eager PyTorch runs the norms: it needs \"elementwise\": \"aten\" (fused kernels fuse them already)");
  t.cross_entropy = parse_choice(w, "cross_entropy", CrossEntropy::in_place,
                                 {{"in_place", CrossEntropy::in_place}, {"aten", CrossEntropy::aten}, {"compiled", CrossEntropy::compiled}});
  t.optimizer = parse_choice(w, "optimizer", OptimizerImpl::fused, {{"fused", OptimizerImpl::fused}, {"foreach", OptimizerImpl::foreach}});
  t.loss_parallel = w.optional_bool("loss_parallel").value_or(true);
  if (w.has("loss_parallel") && !t.pytorch_loss())
    fail_at(w.child_path("loss_parallel"),
            "applies to \"cross_entropy\": \"aten\" or \"compiled\" (Megatron-LM's in-place loss is always vocabulary-parallel)");
  // What Inductor makes of loss_parallel's DTensor ops is not modelled.
  if (t.cross_entropy == CrossEntropy::compiled && t.loss_parallel && t.mesh.size(MeshDim::tp) > 1)
    fail_at(w.child_path("cross_entropy"), "\"compiled\" is modelled on gathered logits with TP: say \"loss_parallel\": false "
                                           "(a compiled loss_parallel is not modelled)");
  if (w.has("loss_chunks")) {
    const std::int64_t n = w.positive_int("loss_chunks");
    if (n > 4096) fail_at(w.child_path("loss_chunks"), fmt::format("{} is more than the limit 4096", n));
    if (!t.pytorch_loss())
      fail_at(w.child_path("loss_chunks"), "is torchtitan's chunked loss around PyTorch's cross entropy: it needs \"cross_entropy\": \"aten\" or \"compiled\"");
    t.loss_chunks = static_cast<int>(n);
  }
  if (t.aten_elementwise && t.compile)
    fail_at(w.child_path("elementwise"), "\"aten\" is uncompiled PyTorch's kernels; with \"compile\": true they are fused");
  t.sequence_parallel = w.optional_bool("sequence_parallel").value_or(true);
  t.tp_saves_gathered_input = parse_tp_weight_grad_input(w);
  t.batch_first = parse_activation_layout(w);
  // Context parallelism's attention loop and the MoE dispatch are built on sequence-parallel
  // token shards; their form without it is not modelled.
  if (!t.sequence_parallel && (t.mesh.size(MeshDim::cp) > 1 || t.model.is_moe()))
    fail_at(w.child_path("sequence_parallel"), fmt::format("false is modelled for dense models without context parallelism only ({})",
                                                           t.model.is_moe() ? "this model has experts" : "cp > 1"));
  t.attention = parse_attention_choice(w);
  // Context parallelism's attention loop is built of flash-attention blocks.
  if (t.attention.impl == AttentionImpl::unfused && t.mesh.size(MeshDim::cp) > 1)
    fail_at(w.child_path("attention"), "\"unfused\" is not modelled with context parallelism (cp > 1): its blocks are flash attention");
  // MLA's unfused kernels are not modelled (its keys and values come from a latent).
  if (t.model.is_mla() && t.attention.impl == AttentionImpl::unfused)
    fail_at(w.child_path("attention"), "\"unfused\" is not modelled for multi-head latent attention");
  // torchtitan's per-op policy is modelled on layers with fused attention (its save list
  // names SDPA; unfused attention's bmm and softmax would fall under it otherwise).
  if (t.checkpoint == Checkpointing::selective_op && t.attention.impl == AttentionImpl::unfused)
    fail_at(w.child_path("activation_checkpoint"), "\"selective_op\" is modelled with fused attention only (attention is \"unfused\")");
  t.cp_method = parse_choice(w, "cp_method", CpMethod::allgather, {{"allgather", CpMethod::allgather}, {"ring", CpMethod::ring}});
  t.cp_method_ignored = w.has("cp_method") && t.mesh.size(MeshDim::cp) == 1;
  if (w.has("moe_dispatch_chunks")) {
    const std::int64_t n = w.positive_int("moe_dispatch_chunks");
    if (n > 64) fail_at(w.child_path("moe_dispatch_chunks"), fmt::format("{} is more than the limit 64", n));
    if (!t.model.is_moe()) fail_at(w.child_path("moe_dispatch_chunks"), fmt::format("{} has no experts", t.model.name));
    t.moe_dispatch_chunks = static_cast<int>(n);
  }
  parse_moe_all_to_all(w, t);
  if (w.has("expert_load_skew")) {
    const Json& v = w.at("expert_load_skew");
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      fail_at(w.child_path("expert_load_skew"), fmt::format("must be a number >= 0, got {}", v.dump()));
    t.expert_load_skew = v.get<double>();
  }
  if (w.has("expert_load")) t.expert_load = parse_expert_load(w, t.model);
  if (w.has("expert_load") && w.has("expert_load_skew"))
    fail_at(w.child_path("expert_load"), "give either expert_load (a histogram) or expert_load_skew, not both");
  check_zero_bubble(t, w);
  check_divisibility(t, w);
  return t;
}

void check_attention_hardware(const AttentionChoice& a, const HardwareSpec& hw) {
  if (a.impl == AttentionImpl::unfused) return;
  const std::string missing = missing_attention_kernel(hw, attention_kernel_of(a.impl));
  if (!missing.empty()) fail_at("$.workload.attention", fmt::format("\"{}\": {}", attention_impl_name(a.impl), missing));
}

std::vector<std::string> check_training_hardware(const TrainingStepSpec& step, std::int64_t gpus, const HardwareSpec& hw) {
  std::vector<std::string> notes;
  check_attention_hardware(step.attention, hw);
  if (step.linear_dtype && !hw.computes(*step.linear_dtype))
    fail_at("$.workload.linear_dtype", fmt::format("hardware {} has no {} math (its compute.peak_dense lacks it)", hw.name,
                                                   dtype_name(*step.linear_dtype)));
  if (hw.memory.capacity_bytes <= 0)
    fail_at("$.hardware", fmt::format("{} does not give memory.capacity, which a training step's memory ledger needs", hw.name));
  const int per_node = hw.fabric.gpus_per_node;
  const std::int64_t nodes = (gpus + per_node - 1) / per_node;
  if (nodes > 1 && !hw.cluster.present())
    fail_at("$.gpus", fmt::format("{} GPUs span {} nodes of {}, but {} describes no cluster network (add a \"cluster\" section)", gpus,
                                  nodes, per_node, hw.name));
  // A TP group larger than a node, or spread by the dims inside it in mesh_order, crosses
  // the NICs: its layer is simulated on a fabric of its own nodes joined by their NICs.
  const GroupLayout tp_group = group_layout(step.mesh, MeshDim::tp, per_node, 0);
  if (tp_group.nodes > 1)
    notes.push_back(fmt::format("each TP group spans {} nodes ({} GPUs in each): its collectives cross the NICs; the other "
                                "dimensions' traffic on those NICs is priced apart, not shared with it",
                                tp_group.nodes, tp_group.per_node));
  if (step.moe_node_limit > 0) {
    // The chosen nodes must hold top_k experts between them.
    const GroupLayout ep = group_layout(step.mesh, MeshDim::ep, per_node, 0);
    const std::int64_t reach = std::min<std::int64_t>(step.moe_node_limit, ep.nodes) * (step.model.moe.experts / ep.nodes);
    if (reach < step.model.moe.top_k)
      fail_at("$.workload.moe_node_limit", fmt::format("{} node(s) of the ep group hold {} experts, fewer than top_k {}", std::min(step.moe_node_limit, ep.nodes),
                                                       reach, step.model.moe.top_k));
  }
  if (step.pipeline_settings_ignored)
    notes.push_back(step.microbatches > 1
                        ? fmt::format("pp is 1: pp_schedule, virtual_stages, pp_p2p, pp_runtime and the pp_*_less_layers apply to a pipeline; the {} microbatches are gradient accumulation",
                                      step.microbatches)
                        : "pp is 1: microbatches (they do not divide the local batch), pp_schedule, virtual_stages, pp_p2p, pp_runtime and the pp_*_less_layers apply to a "
                          "pipeline; the local batch runs as one pass");
  if (step.fsdp_fp8_all_gather != Fp8AllGather::off && step.shard_ranks() == 1) notes.push_back("no FSDP (fsdp x cp x ep is 1): fsdp_fp8_all_gather has no all-gather to apply to");
  if (step.cp_method_ignored) notes.push_back("cp is 1: cp_method applies to context parallelism and is not used");
  if (step.batch_first && (step.mesh.size(MeshDim::tp) == 1 || !step.sequence_parallel))
    notes.push_back("activation_layout applies to sequence-parallel TP's all-gathers and reduce-scatters; this mesh has none");
  notes.push_back(fmt::format("{} GPUs on {}: {} node(s) of {}; simulated: one rank per pipeline stage (the mesh is symmetric)", gpus,
                              hw.name, nodes, per_node));
  return notes;
}

}  // namespace tpsim
