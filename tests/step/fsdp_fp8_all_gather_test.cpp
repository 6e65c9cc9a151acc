// FSDP2's float8 all-gather of fp8 linears' weights (torchao float8/fsdp_utils.py,
// torchtitan's enable_fsdp_float8_all_gather and precompute_float8_dynamic_scale_for_fsdp).
#include "support/catch.hpp"

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "tpsim/io/input_error.hpp"
#include "tpsim/step/kernels_alone.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

Scenario scenario(const std::string& mesh, int gpus, const std::string& extra) {
  return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm_llama3_cluster", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {{{}}},
                   "linear_dtype": "fp8"{}}},
      "variants": ["baseline"]}})",
                                                gpus, mesh, extra)),
                        "");
}

StepVariantRun run(const std::string& mesh, int gpus, const std::string& extra = "") {
  const Scenario s = scenario(mesh, gpus, extra);
  return run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline"));
}

const StepTask& task(const StepVariantRun& r, const std::string& name) {
  for (const auto& t : r.plan.program.tasks)
    if (t.name == name) return t;
  throw std::logic_error("no task " + name);
}

int count(const StepVariantRun& r, const std::string& name) {
  int n = 0;
  for (const auto& t : r.plan.program.tasks) n += t.name == name;
  return n;
}

double part(const MemoryLedger& l, const std::string& kind) {
  for (const auto& [k, b] : l.parts)
    if (k == kind) return b;
  throw std::logic_error("no ledger part " + kind);
}

constexpr const char* kFsdp = R"("fsdp": 16, "tp": 8)";
constexpr const char* kGather = R"(, "fsdp_fp8_all_gather": true)";
constexpr const char* kPrecomputed = R"(, "fsdp_fp8_all_gather": true, "fsdp_fp8_precompute_scale": true)";

}  // namespace

TEST_CASE("An fp8 all-gather moves half the bytes of a bf16 one, and its copy-out copies half", "[step][fsdp][fp8]") {
  const StepVariantRun bf16 = run(kFsdp, 128), fp8 = run(kFsdp, 128, kPrecomputed);
  const StepTask &a = task(bf16, "fsdp.all_gather.layer3"), &b = task(fp8, "fsdp.all_gather.layer3");
  CHECK(b.wire_bytes == Approx(a.wire_bytes / 2).epsilon(1e-12));
  CHECK(b.work < a.work);
  // The layer's forward after its all-gather copies each gathered fp8 weight out once.
  const HardwareSpec& hw = scenario(kFsdp, 128, "").hardware;
  const double layer = scenario(kFsdp, 128, "").workload.step.model.layer_params() / 8;
  CHECK(task(fp8, "layer3.forward.mb0").work - fp8.costs.forward == kernels_alone({{"copy", ElementwiseOp{layer, layer}}}, hw));
  // The gradients' reduce-scatter is unchanged (fp32 by default).
  CHECK(task(fp8, "fsdp.reduce_scatter.layer3").wire_bytes == task(bf16, "fsdp.reduce_scatter.layer3").wire_bytes);
}

TEST_CASE("Weights gathered in fp8 are not cast again before each GEMM: the layer passes shorten", "[step][fsdp][fp8]") {
  const StepVariantRun cast_each_time = run(kFsdp, 128), gathered = run(kFsdp, 128, kGather);
  CHECK(gathered.costs.forward < cast_each_time.costs.forward);
  CHECK(gathered.costs.backward < cast_each_time.costs.backward);
  // Without FSDP there is no gather to cast before: the key changes nothing (and a note says so).
  const StepVariantRun dp = run(R"("dp": 16, "tp": 8)", 128), dp_key = run(R"("dp": 16, "tp": 8)", 128, kGather);
  CHECK(dp_key.costs.forward == dp.costs.forward);
  CHECK(dp_key.sim.makespan == dp.sim.makespan);
  CHECK_FALSE(scenario(R"("dp": 16, "tp": 8)", 128, kGather).notes.empty());
}

TEST_CASE("Dynamic fp8 scales all-reduce one amax per weight before each all-gather, precomputed ones once per step", "[step][fsdp][fp8]") {
  const StepVariantRun dynamic = run(kFsdp, 128, kGather), precomputed = run(kFsdp, 128, kPrecomputed);
  // Seven linear weights in a Llama layer (Q, K, V, output, w1, w3, w2): seven latency-bound
  // all-reduces of one scalar on the all-gather's stream, on top of the same cast.
  Tick amax = 0;
  for (const auto& c : dynamic.plan.collectives)
    if (c.op.starts_with("all_reduce (fp8 weight amax")) amax = c.cost.time;
  REQUIRE(amax > 0);
  CHECK(task(dynamic, "fsdp.all_gather.layer3").work - task(precomputed, "fsdp.all_gather.layer3").work >= 7 * amax);
  CHECK(count(dynamic, "fsdp.all_reduce.fp8_scales") == 0);
  // Precomputed: after the optimizer step, one all-reduce of every weight's amax per stage.
  CHECK(count(precomputed, "fsdp.all_reduce.fp8_scales") == 1);
  const StepTask& scales = task(precomputed, "fsdp.all_reduce.fp8_scales");
  CHECK(precomputed.plan.program.tasks[static_cast<std::size_t>(scales.deps.at(0))].name == "fp8.precompute_scales.amax");
  CHECK(dynamic.sim.makespan > precomputed.sim.makespan);
}

TEST_CASE("FSDP's gathered-parameter buffers hold fp8 layers: half the bf16 bytes", "[step][fsdp][fp8][memory]") {
  const StepVariantRun bf16 = run(kFsdp, 128), fp8 = run(kFsdp, 128, kGather);
  CHECK(part(fp8.memory[0], "FSDP gathered parameters (fp8 layers)") ==
        Approx(part(bf16.memory[0], "FSDP gathered parameters (bf16)") / 2).epsilon(1e-12));
  // With a pipeline every gathered layer is kept; the embedding and output layer stay bf16.
  const StepVariantRun pp = run(R"("fsdp": 8, "tp": 8, "pp": 2)", 128, kGather + std::string(R"(, "microbatches": 2)"));
  const StageParams& first = pp.plan.stages[0];
  CHECK(part(pp.memory[0], "FSDP gathered parameters (fp8 layers)") == Approx((first.local - first.edge) + 2 * first.edge).epsilon(1e-12));
  CHECK(first.edge > 0);
}

TEST_CASE("The fp8 all-gather keys are checked", "[step][fsdp][fp8][input]") {
  const auto fails = [](const std::string& workload_extra, const std::string& message) {
    const std::string doc = fmt::format(R"({{"hardware": "h100_sxm_llama3_cluster", "gpus": 128, "dtype": "bf16",
        "workload": {{"op": "training_step", "model": "{}", "seq_len": 8192, "local_batch": 2, "mesh": {{"fsdp": 16, "tp": 8}}{}}},
        "variants": ["baseline"]}})",
                                        message.find("experts") != std::string::npos ? "deepseek_v3_like" : "llama3_8b", workload_extra);
    CHECK_THROWS_WITH(parse_scenario(Json::parse(doc), ""), Catch::Contains(message));
  };
  fails(R"(, "fsdp_fp8_all_gather": true)", "$.workload.fsdp_fp8_all_gather: gathers the weights of fp8 linears");
  fails(R"(, "linear_dtype": "fp8", "fsdp_fp8_precompute_scale": true)", "$.workload.fsdp_fp8_precompute_scale: applies to");
  fails(R"(, "linear_dtype": "fp8", "fsdp_fp8_all_gather": "yes")", "$.workload.fsdp_fp8_all_gather");
  fails(R"(, "linear_dtype": "fp8", "fsdp_fp8_all_gather": true)", "experts");
  fails(R"(, "tp_fp8_all_gather": true)", "$.workload.tp_fp8_all_gather: gathers the inputs of fp8 linears");
  fails(R"(, "fp8_recipe": "rowwise")", "$.workload.fp8_recipe: scales the operands of fp8 linears");
  fails(R"(, "linear_dtype": "fp8", "fp8_recipe": "blockwise")", "$.workload.fp8_recipe");
  fails(R"(, "linear_dtype": "fp8", "fp8_rowwise_gemm": "cublas")", "$.workload.fp8_rowwise_gemm: picks the kernel of rowwise-scaled GEMMs");
  fails(R"(, "linear_dtype": "fp8", "fp8_recipe": "rowwise", "fsdp_fp8_all_gather": true)", "$.workload.fsdp_fp8_all_gather: is tensorwise scaling's");
  fails(R"(, "linear_dtype": "fp8", "fp8_recipe": "rowwise", "tp_fp8_all_gather": true)", "$.workload.tp_fp8_all_gather: casts with one scale per tensor");
}

TEST_CASE("Rowwise fp8 gathers bf16 over TP and casts more: its step is slower than tensorwise's", "[step][fp8]") {
  const Scenario rowwise = scenario(kFsdp, 128, R"(, "fp8_recipe": "rowwise")");
  CHECK_FALSE(rowwise.workload.step.tp_fp8_all_gather);
  CHECK(rowwise.workload.step.fp8.aten_gemm(Dtype::fp8));
  CHECK_FALSE(rowwise.workload.step.fp8.aten_gemm(Dtype::bf16));
  CHECK_FALSE(scenario(kFsdp, 128, R"(, "fp8_recipe": "rowwise", "fp8_rowwise_gemm": "cublas")").workload.step.fp8.aten_gemm(Dtype::fp8));
  const StepVariantRun r = run(kFsdp, 128, R"(, "fp8_recipe": "rowwise")"), t = run(kFsdp, 128);
  CHECK(r.costs.forward > t.costs.forward);
  CHECK(r.costs.backward > t.costs.backward);
}

TEST_CASE("TP all-gathers follow the linears' dtype unless told otherwise", "[step][fp8]") {
  CHECK(scenario(kFsdp, 128, "").workload.step.tp_fp8_all_gather);
  CHECK_FALSE(scenario(kFsdp, 128, R"(, "tp_fp8_all_gather": false)").workload.step.tp_fp8_all_gather);
  const StepVariantRun fp8 = run(kFsdp, 128), bf16_gathers = run(kFsdp, 128, R"(, "tp_fp8_all_gather": false)");
  CHECK(fp8.costs.forward < bf16_gathers.costs.forward);
  CHECK(fp8.costs.forward_exposed_comm < bf16_gathers.costs.forward_exposed_comm);
}
