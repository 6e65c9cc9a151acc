#include "support/catch.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/report/step_trace.hpp"
#include "tpsim/step/layer_costs.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

Scenario step(int gpus, const std::string& mesh) {
  return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {{{}}}}},
      "variants": ["baseline"]}})",
                                                gpus, mesh)),
                        "");
}

// The same step with the layer passes' TP traffic taken off the links.
LayerCosts without_tp_traffic(LayerCosts c) {
  c.forward_tp_bytes = c.backward_tp_bytes = c.recompute_tp_bytes = {};
  c.output_forward_tp_bytes = c.output_backward_tp_bytes = {};
  return c;
}

// Time the step's tasks of `dim` ran, in all.
Tick time_in(const StepVariantRun& run, const std::string& dim) {
  Tick sum = 0;
  for (std::size_t i = 0; i < run.plan.program.tasks.size(); ++i)
    if (run.plan.program.tasks[i].dim == dim) sum += run.sim.times[i].end - run.sim.times[i].start;
  return sum;
}

}  // namespace

TEST_CASE("a layer pass sends its TP collectives' ring bytes over the node's NVLink", "[step][sharing][tp]") {
  const Scenario s = step(8, R"("fsdp": 2, "tp": 4)");
  const LayerCosts c = simulate_layer_costs(s, "baseline");
  // Forward with sequence parallelism: two all-gathers and two reduce-scatters of the TP group's
  // tokens x hidden activations; each GPU of a ring sends (tp - 1) / tp of each.
  const double tokens = 2 * 8192, hidden = 4096, tp = 4;
  CHECK(c.forward_tp_bytes.nvlink == Approx(4 * (tp - 1) / tp * tokens * hidden * 2).epsilon(1e-9));
  CHECK(c.forward_tp_bytes.nic == 0);  // one node
  // Backward runs their transposes and gathers the inputs again for the weight gradients.
  CHECK(c.backward_tp_bytes.nvlink > c.forward_tp_bytes.nvlink);
  CHECK(c.recompute_tp_bytes.nvlink == 0);  // no checkpointing here
  CHECK(c.output_forward_tp_bytes.nvlink == Approx((tp - 1) / tp * tokens * hidden * 2).epsilon(1e-9));
  // The step's passes carry it: bytes on the trace's NVLink counter, a load on the link.
  const StepVariantRun run = run_step_variant(s, "baseline", c);
  int loaded = 0;
  for (const StepTask& t : run.plan.program.tasks)
    if (!t.communication && t.link_bytes.nvlink > 0) {
      ++loaded;
      CHECK(t.link_load.nvlink > 0);
      CHECK(t.link_load.nvlink <= 1);
      CHECK(t.link_load.nic == 0);
    }
  CHECK(loaded > 0);
}

TEST_CASE("FSDP inside the TP group's node shares its NVLink with the layers' TP traffic", "[step][sharing][tp]") {
  // 8 GPUs: TP 4 x FSDP 2, both inside one node; the FSDP collectives run on NVLink beside the
  // passes' TP rings, so they take longer than with the TP traffic taken off the links.
  const Scenario inside = step(8, R"("fsdp": 2, "tp": 4)");
  const LayerCosts c = simulate_layer_costs(inside, "baseline");
  const StepVariantRun shared = run_step_variant(inside, "baseline", c);
  const StepVariantRun alone = run_step_variant(inside, "baseline", without_tp_traffic(c));
  CHECK(time_in(shared, "fsdp") > time_in(alone, "fsdp"));
  CHECK(shared.sim.makespan >= alone.sim.makespan);
  // 16 GPUs: TP 8 fills the node, FSDP crosses on the NICs: the TP traffic changes nothing.
  const Scenario across = step(16, R"("fsdp": 2, "tp": 8)");
  const LayerCosts a = simulate_layer_costs(across, "baseline");
  CHECK(a.forward_tp_bytes.nvlink > 0);
  CHECK(run_step_variant(across, "baseline", a).sim.makespan == run_step_variant(across, "baseline", without_tp_traffic(a)).sim.makespan);
}

TEST_CASE("a TP group across nodes shares its NICs with FSDP: its bytes split by where they go", "[step][sharing][tp]") {
  // TP 8 over two nodes (fsdp inside the node): each GPU's TP rings and copies cross the NICs in
  // part; FSDP's groups cross them too, and now share them with the passes.
  const Scenario s = parse_scenario(Json::parse(R"({"hardware": "h100_sxm", "gpus": 16, "dtype": "bf16",
      "workload": {"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2,
                   "mesh": {"fsdp": 2, "tp": 8}, "mesh_order": ["fsdp", "tp"]}, "variants": ["baseline"]})"),
                                    "");
  const LayerCosts c = simulate_layer_costs(s, "baseline");
  CHECK(c.forward_tp_bytes.nic > 0);
  CHECK(c.forward_tp_bytes.nvlink > 0);
  // At least the four ring passes' (tp - 1) / tp of the activations leave each GPU (across
  // nodes NCCL also forwards inside the node, so rank 0 may send more).
  const double tokens = 2 * 8192, hidden = 4096, tp = 8;
  CHECK(c.forward_tp_bytes.nvlink + c.forward_tp_bytes.nic >= 4 * (tp - 1) / tp * tokens * hidden * 2 * (1 - 1e-9));
  const double ring = (tp - 1) / tp * tokens * hidden * 2;
  CHECK(c.output_forward_tp_bytes.nic == Approx(ring * 2 / tp).epsilon(1e-9));  // two of eight hops cross
  CHECK(c.output_forward_tp_bytes.nvlink + c.output_forward_tp_bytes.nic == Approx(ring).epsilon(1e-9));
  const StepVariantRun shared = run_step_variant(s, "baseline", c);
  const StepVariantRun alone = run_step_variant(s, "baseline", without_tp_traffic(c));
  CHECK(time_in(shared, "fsdp") > time_in(alone, "fsdp"));
  CHECK(shared.sim.makespan >= alone.sim.makespan);
}

TEST_CASE("the step trace's NVLink counter shows the passes' TP traffic", "[step][sharing][trace]") {
  // 16 GPUs as TP 8 x FSDP 2: FSDP on the NICs, so any NVLink rate comes from the layer passes.
  const StepResult r = run_training_step(step(16, R"("fsdp": 2, "tp": 8)"));
  double peak_nvlink = 0;
  int passes_with_bytes = 0;
  const Json trace = step_trace(r);
  for (const Json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "C" && e.value("name", "") == "link traffic (GB/s)")
      peak_nvlink = std::max(peak_nvlink, e["args"]["NVLink"].get<double>());
    if (e.value("ph", "") == "X" && e.contains("args") && e["args"].contains("tp_nvlink_bytes")) ++passes_with_bytes;
  }
  CHECK(passes_with_bytes > 0);
  CHECK(peak_nvlink > 0);
  CHECK(peak_nvlink <= 450.0);  // never past the GPU's NVLink port (GB/s each way)
}
