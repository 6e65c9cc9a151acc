#pragma once
// The routed experts of one MoE layer on one rank, per microbatch, as token-choice MoE
// runs them (Megatron-LM's all-to-all token dispatcher; torchtitan's MoE): the router
// scores the TP group's tokens (gathered by sequence parallelism), every token goes to its
// top_k experts, one all-to-all over the ep group sends each token to the rank holding its
// expert (experts / ep per rank), the rank runs its experts as grouped GEMMs (each expert's
// FFN sharded over tp like the dense FFN: Megatron's default expert tensor parallelism),
// a second all-to-all brings the outputs back, and they are summed by the router's weights.
// Backward runs the same path in reverse with twice the GEMM work. The all-to-alls block:
// the experts need their tokens and the next op needs the outputs (nothing overlaps them).
// Load: uniform by default, or skewed (a skew parameter or an explicit histogram); the rank
// whose experts get the most tokens sets the pace (every rank waits for its outputs), and
// the all-to-alls are priced as the uneven flows they are (step/all_to_all).
#include <string>
#include <utility>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/dag/op.hpp"
#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/step/eager_moe_kernels.hpp"
#include "tpsim/step/group_collective.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

// fp8 dispatch's fine-grained scales (DeepSeek-V3 report, section 3.3.2): one fp32 scale
// per token and 128 channels travels with the fp8 values.
constexpr double kFp8DispatchScaleGroup = 128, kFp8DispatchScaleBytes = 4;

// Node-limited routing (DeepSeek-V3 report, section 2.1.2): each token picks at most
// `node_limit` of the `nodes` its ep group spans (0: no limit), then its top_k experts
// among those nodes' experts. The expected number of distinct nodes it reaches, with the
// nodes and the chosen nodes' experts equally likely.
double distinct_nodes_per_token(std::int64_t experts, std::int64_t top_k, int nodes, int node_limit);

struct ExpertLoad {
  std::vector<double> expert_slots;  // per expert: token slots the whole ep group routes to it
  std::vector<double> rank_share;    // per ep rank: the share of every rank's slots its experts get
  int busiest_rank = 0;              // the rank whose experts get the most: it paces every MoE layer
  double sent_slots = 0;             // token slots each rank sends (its tokens x top_k)
  double rank_slots(int rank) const;  // token slots rank `rank` computes
  // Token slots the busiest rank's experts compute per token a rank routes: top_k on average.
  double busiest_slots_per_token(std::int64_t top_k) const;
  std::vector<double> rank_experts(int rank) const;  // its experts' slots
};
// Experts are placed in order, experts / ep to a rank. The shares come from the workload's
// `expert_load` histogram, or else from `expert_load_skew` (expert 0 gets 1 + skew times the
// mean, the others the rest evenly); uniform without either.
ExpertLoad expert_load(const TrainingStepSpec& t);

struct MoeLayerCost {
  Tick forward = 0, backward = 0;  // the routed block, per microbatch
  Tick forward_all_to_all = 0, backward_all_to_all = 0;  // the part of them all-to-alls take (exposed)
  Tick dispatch = 0, combine = 0;                         // one dispatch and one combine all-to-all (per chunk when chunked)
  Tick forward_tp = 0, backward_tp = 0;                  // the TP gather and reduce-scatter it adds (no shared experts)
  double dispatch_bytes = 0;                             // what one rank sends in a dispatch (its own experts' share included)
  std::vector<StepCollective> collectives;
  std::vector<LayerPhase> forward_phases, backward_phases;  // its all-to-alls (and TP collectives), from its start
};

// One grouped GEMM batch of the busiest rank's experts: `batch` experts of `rows` token
// rows each, hidden `hidden`, each expert's FFN shard `ffn` wide (`up` up-projections),
// forward (up, activation, down) or backward (each GEMM's input and weight gradients).
// With linears narrower than the activations (fp8), each GEMM's operands are cast first as
// torchao's rowwise fp8 grouped GEMM does (see expert_parallel.cpp); `tag` names the batch.
// `fp8_dispatch`: the up-projection's input (forward) and the down-projection's output
// gradient (backward) arrive in fp8 from the all-to-all, already cast.
struct ExpertGroup {
  std::int64_t rows = 0, batch = 0, hidden = 0, ffn = 0, up = 1;
  Dtype dtype = Dtype::bf16, linear = Dtype::bf16;
  bool compile = false;
  bool fp8_dispatch = false;
  bool aten = false;  // eager: the activation as ATen's silu and mul kernels
  bool grouped = false;  // torch._grouped_mm (PyTorch's grouped kernel), not a batched GEMM
  // Grouped, experts of unequal loads: each one's rows, in expert order (one kernel over
  // all of them; `rows` is then their mean and `batch` their count). Empty: `batch` of `rows`.
  std::vector<std::int64_t> expert_rows{};
  double total_rows() const;
};
std::vector<std::pair<std::string, OpPayload>> expert_group_ops(const ExpertGroup& g, bool backward, const std::string& tag);

// One rank's MoE layer as eager torchtitan's kernels see it (step/eager_moe_kernels), for one
// microbatch of `chunks`, under the routing `load` (expert_load(t)).
EagerMoeShape eager_moe_shape(const TrainingStepSpec& t, const ExpertLoad& load, Dtype dtype, int chunks);
// The busiest rank's experts' kernels for one microbatch (of `chunks`), forward or backward:
// as torchtitan runs them, one torch._grouped_mm over every local expert (`grouped_mm`), or
// batched, experts with the same token count in one batched GEMM, the largest first; eager
// (`"elementwise": "aten"`) between torchtitan's permutation into expert order and back.
std::vector<std::pair<std::string, OpPayload>> busiest_rank_expert_ops(const TrainingStepSpec& t, Dtype dtype, bool backward, int chunks);

// `tp_collectives`: whether the routed block gathers its input and reduce-scatters its output
// over the TP group itself (a model without shared experts; otherwise their FFN does it).
MoeLayerCost simulate_moe_layer(const TrainingStepSpec& t, const HardwareSpec& hw, Dtype dtype, bool tp_collectives);

}  // namespace tpsim
