// FSDP2's copies around its collectives (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py).
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/step_program.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

struct Planned {
  Scenario scenario;
  LayerCosts costs;
  StepPlan plan;
};

Planned plan(const std::string& mesh, int gpus, const std::string& extra = "") {
  Planned p{parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm_llama3_cluster", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {{{}}}{}}},
      "variants": ["baseline"]}})",
                                                                gpus, mesh, extra)),
                               ""),
            {}, {}};
  const auto& t = p.scenario.workload.step;
  p.costs = simulate_layer_costs(p.scenario, "baseline");
  p.plan = plan_step(t, p.costs, p.scenario.hardware, p.scenario.dtype);
  return p;
}

const StepTask& task(const StepPlan& p, const std::string& name) {
  for (const auto& t : p.program.tasks)
    if (t.name == name) return t;
  throw std::logic_error("no task " + name);
}

Tick copy(const HardwareSpec& hw, double read, double write) { return kernels_alone({{"copy", ElementwiseOp{read, write}}}, hw); }

}  // namespace

TEST_CASE("FSDP2 copies each gathered layer out of the all-gather buffer and chunk-cats its gradients on the compute stream", "[step][fsdp]") {
  const Planned p = plan(R"("fsdp": 16, "tp": 8)", 128);
  const auto& t = p.scenario.workload.step;
  const HardwareSpec& hw = p.scenario.hardware;
  const double layer = t.model.layer_params() / 8;  // bf16 parameters of one layer on one TP rank
  // Forward: the layer's pass after its all-gather also reads and writes every parameter once.
  CHECK(task(p.plan, "layer3.forward.mb0").work - p.costs.forward == copy(hw, 2 * layer, 2 * layer));
  // Backward: gathered again (copy-out), and its bf16 gradients widened to fp32 into the
  // reduce-scatter input (chunk_cat, converting element by element: ATen's cast-loop rate).
  const Tick widen = kernels_alone({{"chunk_cat", ElementwiseOp{2 * layer, 4 * layer, layer, ElementLoop::cast}}}, hw);
  CHECK(widen > copy(hw, 2 * layer, 4 * layer));  // slower than the same bytes streamed
  CHECK(task(p.plan, "layer3.backward.mb0").work - p.costs.backward - p.costs.recompute == copy(hw, 2 * layer, 2 * layer) + widen);
  // Without FSDP nothing is copied.
  const Planned dp = plan(R"("dp": 16, "tp": 8)", 128);
  CHECK(task(dp.plan, "layer3.forward.mb0").work == dp.costs.forward);
}

TEST_CASE("FSDP2's copies are memory-bound: twice the HBM bandwidth, half the copy time", "[step][fsdp]") {
  const Planned p = plan(R"("fsdp": 16, "tp": 8)", 128);
  HardwareSpec fast = p.scenario.hardware;
  fast.memory.hbm_bytes_per_ps *= 2;
  fast.memory.sm_max_bytes_per_ps *= 2;
  const double bytes = 2.0 * p.scenario.workload.step.model.layer_params() / 8;
  const double slow_us = to_us(copy(p.scenario.hardware, bytes, bytes)), fast_us = to_us(copy(fast, bytes, bytes));
  CHECK(fast_us / slow_us == Approx(0.5).epsilon(0.05));
}

TEST_CASE("With a pipeline FSDP2 gathers and copies out once per step, and chunk-cats only after the last microbatch", "[step][fsdp]") {
  const Planned p = plan(R"("fsdp": 8, "tp": 8, "pp": 2)", 128, R"(, "microbatches": 2)");
  const auto first = [&](int layer, const std::string& pass, int mb) { return task(p.plan, fmt::format("layer{}.{}.mb{}", layer, pass, mb)).work; };
  CHECK(first(3, "forward", 0) > p.costs.forward);    // gathered, copied out
  CHECK(first(3, "forward", 1) == p.costs.forward);   // kept from the first microbatch
  CHECK(first(3, "backward", 0) == p.costs.backward + p.costs.recompute);
  CHECK(first(3, "backward", 1) > p.costs.backward + p.costs.recompute);  // reduce-scatter after the last one
}

TEST_CASE("the output layer stays gathered from its forward to its backward: only the last layer is gathered again", "[step][fsdp]") {
  // torchtitan's [norm, lm_head] FSDP unit is not resharded after forward (fsdp.py: only under
  // the "always" policy), so the last layer's backward gather carries a decoder layer's weights
  // alone, where its forward gather also carried the output layer's.
  const Planned p = plan(R"("fsdp": 8)", 8);
  const StepTask &last_fwd = task(p.plan, "fsdp.all_gather.layer31"), &prev_fwd = task(p.plan, "fsdp.all_gather.layer30");
  const StepTask &last_bwd = task(p.plan, "fsdp.all_gather.layer31.backward"), &prev_bwd = task(p.plan, "fsdp.all_gather.layer30.backward");
  CHECK(last_fwd.work > prev_fwd.work);
  CHECK(last_bwd.work == prev_bwd.work);
  CHECK(prev_bwd.work == prev_fwd.work);
  // The embedding's unit is resharded: the first layer's backward gather still carries it.
  CHECK(task(p.plan, "fsdp.all_gather.layer0.backward").work == task(p.plan, "fsdp.all_gather.layer0").work);
  CHECK(task(p.plan, "fsdp.all_gather.layer0.backward").work > prev_bwd.work);
}
