#include "tpsim/step/context_parallel.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tpsim/step/group_layout.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/step_simulator.hpp"

namespace tpsim {

namespace {

struct CpShape {
  std::int64_t tokens = 0;  // this rank's tokens of the microbatch (both chunks of every sequence)
  std::int64_t per_sequence = 0;
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t v_head_dim = 0;  // values' (and outputs') width per head: MLA's is narrower than its keys'
  // The K/V heads of the tensors SDPA is handed, which the loop moves and accumulates:
  // kv_heads, or every query head where the model code repeated K and V before SDPA.
  std::int64_t sdpa_kv_heads = 0;
};

// MLA's blocks are its per-head keys and values as the up projection made them: the K/V
// tensors PyTorch's context_parallel hands SDPA (192-wide keys, 128-wide values for
// DeepSeek-V3), not the compressed latent. torchtitan's model code hands it K and V already
// repeated to every query head, so its ring moves (and its backward accumulates in fp32)
// heads / kv_heads times the GQA bytes (_templated_ring_attention takes SDPA's key and value).
CpShape cp_shape(const TrainingStepSpec& t) {
  const int tp = t.mesh.size(MeshDim::tp), cp = t.mesh.size(MeshDim::cp);
  const std::int64_t heads = t.model.heads / tp, kv_heads = std::max<std::int64_t>(1, t.model.kv_heads / tp);
  const bool repeated = kv_repeated_for_sdpa(t.torchtitan_model_code(), t.model.is_mla(), kv_heads, heads);
  return {t.rank_tokens(), t.seq_len / cp, heads, kv_heads, t.model.head_dim, t.model.v_head_dim(), repeated ? heads : kv_heads};
}

Tick alone(OpPayload op, const HardwareSpec& hw) { return kernels_alone({{"kernel", std::move(op)}}, hw); }

}  // namespace

AttentionProblem cp_block_problem(const TrainingStepSpec& t, Dtype dtype, bool backward) {
  const CpShape s = cp_shape(t);
  return AttentionProblem{s.tokens, s.per_sequence, s.heads, s.kv_heads, s.head_dim, true, backward, dtype,
                          attention_kernel_of(t.attention.impl), s.v_head_dim};
}

double cp_kv_block_bytes(const TrainingStepSpec& t, double element_bytes) {
  const CpShape s = cp_shape(t);
  return static_cast<double>(s.tokens) * static_cast<double>(s.sdpa_kv_heads * (s.head_dim + s.v_head_dim)) * element_bytes;
}

CpAttentionCost simulate_cp_attention(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool backward) {
  CpAttentionCost c;
  const int cp = t.mesh.size(MeshDim::cp);
  if (cp == 1) return c;
  const CpShape s = cp_shape(t);
  const double e = dtype_bytes(dtype), f32 = 4.0;
  const double q = static_cast<double>(s.tokens) * static_cast<double>(s.heads * s.head_dim);
  const double out = static_cast<double>(s.tokens) * static_cast<double>(s.heads * s.v_head_dim);
  const double kv = static_cast<double>(s.tokens) * static_cast<double>(s.sdpa_kv_heads * (s.head_dim + s.v_head_dim)) / 2;  // K and V, averaged
  const double kv_block = cp_kv_block_bytes(t, e);
  // Every step is half a (2 chunks x 2 chunks) block: the causal local block, or a full
  // block of one chunk's queries or keys.
  const Tick block = alone(cp_block_problem(t, dtype, backward), hw);
  // Forward: fold the block's output and log-sum-exp into the fp32 running output.
  // Backward: add the block's dQ, dK, dV into the fp32 accumulators.
  const Tick fold = backward ? alone(ElementwiseOp{(q + 2 * kv) * (f32 + e), (q + 2 * kv) * f32}, hw)
                             : alone(ElementwiseOp{out * (f32 + e), out * f32}, hw);
  const int leaf = hw.cluster.present() ? hw.cluster.nodes_per_leaf : 0;
  const GroupLayout g = group_layout(t.mesh, MeshDim::cp, hw.fabric.gpus_per_node, leaf);
  const auto charge = [&](const std::string& op, GroupOp kind, double bytes) {
    c.collectives.push_back({"cp", op, bytes, group_collective_cost(kind, bytes, g, hw)});
    return c.collectives.back().cost;
  };
  const bool gather = t.cp_method == CpMethod::allgather;
  const GroupCollectiveCost kv_move = gather ? charge("all_gather (K/V)", GroupOp::all_gather, cp * kv_block)
                                             : charge("send_recv (K/V block)", GroupOp::send_recv, kv_block);
  GroupCollectiveCost dkv_move;
  if (backward) dkv_move = charge("send_recv (fp32 dK/dV block)", GroupOp::send_recv, 2 * kv * f32);

  StepProgram p;
  p.sm_count = hw.sm.count;
  const auto compute = [&](std::string name, Tick work, std::vector<int> deps) {
    StepTask task;
    task.name = std::move(name);
    task.work = work;
    task.deps = std::move(deps);
    c.compute_alone += work;
    return p.add(std::move(task));
  };
  const auto transfer = [&](std::string name, const GroupCollectiveCost& cost, std::vector<int> deps) {
    ++c.transfers;
    return p.add(communication_task(StepStream::cp, std::move(name), "cp", cost, std::move(deps)));
  };
  int kv_ready = -1, last_kv = -1, last_dkv = -1;
  for (int i = 0; i < cp; ++i) {
    // The rotation is issued before this step's attention; the next step waits for it.
    int issued = -1;
    if (i < cp - 1 && (!gather || i == 0)) {
      std::vector<int> deps;
      if (last_kv >= 0) deps.push_back(last_kv);  // a ring forwards the block it received
      issued = last_kv = transfer(gather ? std::string("cp.all_gather.kv") : fmt::format("cp.send_recv.kv.{}", i), kv_move, deps);
    }
    std::vector<int> deps;
    if (i > 0) deps.push_back(kv_ready);
    const int attn = compute(fmt::format("attention.block{}", i), block, deps);
    if (issued >= 0) kv_ready = issued;
    if (!backward) {
      if (i > 0) compute(fmt::format("merge.block{}", i), fold, {attn});
      continue;
    }
    std::vector<int> fold_deps{attn};
    if (last_dkv >= 0) fold_deps.push_back(last_dkv);  // the accumulators arriving from the previous rank
    const int acc = compute(fmt::format("accumulate.block{}", i), fold, fold_deps);
    last_dkv = transfer(fmt::format("cp.send_recv.dkv.{}", i), dkv_move, {acc});
  }
  if (last_dkv >= 0) compute("cp.dkv.wait", 0, {last_dkv});
  c.first_block = block;
  const StepSimulation sim = simulate_step(p);
  c.loop = sim.makespan;
  for (std::size_t i = 0; i < p.tasks.size(); ++i)
    if (p.tasks[i].communication)
      c.phases.push_back({p.tasks[i].name, "cp", sim.times[i].start, sim.times[i].end - sim.times[i].start});
  return c;
}

}  // namespace tpsim
