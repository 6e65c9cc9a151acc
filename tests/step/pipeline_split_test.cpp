// How the layers are split over a pipeline's chunks, with the embedding and output layer
// counted as layers (torchtitan's generate_llm_fqn_per_model_part, Llama 3's balance).
#include "support/catch.hpp"

#include <cmath>

#include <fmt/format.h>

#include "support/simulate.hpp"
#include "support/step_compute.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;
using namespace tpsim::test;

namespace {

std::string doc(const std::string& model, int gpus, const std::string& mesh, const std::string& extra) {
  return fmt::format(R"({{"hardware": "h100_sxm_llama3_cluster", "gpus": {}, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": {}, "seq_len": 2048, "local_batch": 8, "mesh": {{{}}}{}}},
      "variants": ["baseline"]}})",
                     gpus, model, mesh, extra);
}

StepVariantRun run(const std::string& model, int gpus, const std::string& mesh, const std::string& extra = "") {
  const Scenario s = parse_scenario(Json::parse(doc(model, gpus, mesh, extra)), "");
  return run_step_variant(s, "baseline", simulate_layer_costs(s, "baseline"));
}

std::string small(int layers) {
  return fmt::format(R"({{"hidden": 1024, "ffn_hidden": 4096, "heads": 8, "kv_heads": 8, "head_dim": 128, "layers": {}, "vocab": 128256}})",
                     layers);
}

const StepTask& task(const StepVariantRun& r, const std::string& name) {
  for (const auto& t : r.plan.program.tasks)
    if (t.name == name) return t;
  throw std::logic_error("no task " + name);
}

}  // namespace

TEST_CASE("Without weights the layers split evenly, the first chunks taking one more", "[step][pipeline]") {
  const StepVariantRun r = run(small(10), 4, R"("pp": 4)", R"(, "microbatches": 4)");
  CHECK(r.plan.layers_of_chunk == std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}});
}

TEST_CASE("Counted as layers, the embedding and output take the place of layers in the first and last chunks", "[step][pipeline]") {
  // torchtitan's docstring example: 3 layers, 2 stages, both weights 2: 7 effective layers,
  // stage 0 gets 4 (the embedding's 2 and two layers), stage 1 gets 3 (one layer and the output's 2).
  const StepVariantRun r = run(small(3), 2, R"("pp": 2)", R"(, "microbatches": 2, "pp_first_stage_less_layers": 2, "pp_last_stage_less_layers": 2)");
  CHECK(r.plan.layers_of_chunk == std::vector<std::vector<int>>{{0, 1}, {2}});
}

TEST_CASE("Llama 3's balance: one layer per chunk, the first chunk the embedding alone, the last the output alone", "[step][pipeline]") {
  // 14 layers + embedding + output over 4 stages x 4 virtual stages.
  const std::string extra = R"(, "pp_schedule": "interleaved_1f1b", "virtual_stages": 4, "microbatches": 8,
                                 "pp_first_stage_less_layers": 1, "pp_last_stage_less_layers": 1)";
  const StepVariantRun r = run(small(14), 4, R"("pp": 4)", extra);
  REQUIRE(r.plan.layers_of_chunk.size() == 16);
  CHECK(r.plan.layers_of_chunk.front() == std::vector<int>{-1});
  CHECK(r.plan.layers_of_chunk.back() == std::vector<int>{-2});
  for (std::size_t c = 1; c + 1 < 16; ++c) CHECK(r.plan.layers_of_chunk[c] == std::vector<int>{static_cast<int>(c) - 1});
  // The embedding's pass on stage 0 costs the embedding only; layer 0, on stage 1, none of it.
  CHECK(task(r, "embedding.forward.mb0").stage == 0);
  CHECK(task(r, "embedding.forward.mb0").work == r.costs.embedding_forward);
  CHECK(task(r, "layer0.forward.mb0").stage == 1);
  CHECK(task(r, "layer0.forward.mb0").work == r.costs.forward);
  CHECK(task(r, "output.backward.mb0").stage == 3);
  CHECK(task(r, "output.backward.mb0").work == r.costs.output_backward);
  // The same work moved, none made or lost: the compute over all stages is that of the even split.
  const StepVariantRun even = run(small(14), 4, R"("pp": 4)", R"(, "pp_schedule": "interleaved_1f1b", "virtual_stages": 2, "microbatches": 8)");
  CHECK(total_compute(r) == total_compute(even));
  CHECK(optimizer_launch_spread(r, even));
  // The embedding and output parameters sit on the stages that run them.
  CHECK(r.plan.stages[0].edge > 0);
  CHECK(r.plan.stages[3].edge > 0);
  CHECK(r.plan.stages[1].edge == 0);
}

TEST_CASE("Giving the heavy output layer a layer's weight unloads the last stage", "[step][pipeline]") {
  const StepVariantRun even = run(small(16), 4, R"("pp": 4)", R"(, "microbatches": 8)");
  const StepVariantRun weighted = run(small(16), 4, R"("pp": 4)", R"(, "microbatches": 8, "pp_last_stage_less_layers": 1)");
  CHECK(weighted.plan.layers_of_chunk.back().size() == even.plan.layers_of_chunk.back().size() - 1);
  CHECK(weighted.sim.stages.back().compute_busy < even.sim.stages.back().compute_busy);
}

TEST_CASE("Pipeline split keys are checked", "[step][pipeline][input]") {
  CHECK_THAT(scenario_error(doc(small(10), 4, R"("pp": 4)", R"(, "virtual_stages": 4, "pp_schedule": "interleaved_1f1b", "microbatches": 8,
                                "pp_first_stage_less_layers": 1, "pp_last_stage_less_layers": 1)")),
             Catch::Contains("$.workload.model: 10 layers (and the embedding and output, counted as 2) cannot fill"));
  CHECK_THAT(scenario_error(doc(small(8), 4, R"("pp": 4)", R"(, "microbatches": 4, "pp_first_stage_less_layers": 3)")),
             Catch::Contains("$.workload.pp_first_stage_less_layers: is more than the 2 layers a chunk holds"));
  CHECK_THAT(scenario_error(doc(small(8), 4, R"("pp": 4)", R"(, "microbatches": 4, "pp_last_stage_less_layers": -1)")),
             Catch::Contains("$.workload.pp_last_stage_less_layers: must be a whole number"));
  CHECK_THAT(scenario_error(doc(small(8), 4, R"("pp": 4)", R"(, "microbatches": 4, "pp_last_stage_less_layers": 0.5)")),
             Catch::Contains("$.workload.pp_last_stage_less_layers: must be a whole number"));
  // Without a pipeline the keys have nothing to split: a note, not an error.
  const Scenario s = parse_scenario(Json::parse(doc(small(8), 4, R"("fsdp": 4)", R"(, "pp_first_stage_less_layers": 1)")), "");
  CHECK(s.workload.step.pp_embedding_weight == 0);
  CHECK(std::any_of(s.notes.begin(), s.notes.end(), [](const std::string& n) { return n.find("pp_*_less_layers") != std::string::npos; }));
}
