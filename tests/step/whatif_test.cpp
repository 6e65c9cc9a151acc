// What-ifs on the network and memory of a training step: a faster NVLink, faster or
// lower-latency NICs, or faster HBM never make these steps slower (op-level variants can:
// README, "A what-if that makes one part faster can make a variant slower").
#include "support/catch.hpp"
#include "support/simulate.hpp"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/training_step.hpp"

using namespace tpsim;

namespace {

// h100_sxm with the parameter at `pointer` scaled by `factor`, as a user's what-if file writes it;
// removed with this object, whether the step ran or threw.
struct WhatIfFile {
  std::string path;
  WhatIfFile(const std::string& pointer, double factor);
  ~WhatIfFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

WhatIfFile::WhatIfFile(const std::string& pointer, double factor) {
  const std::string base = models_dir() + "/h100_sxm.json";
  std::ifstream in(base);
  const Json shipped = Json::parse(in);
  const Json::json_pointer at(pointer);
  Json file = {{"name", "whatif"}, {"base", base}};
  file[at] = shipped.at(at);
  file[at]["value"] = shipped.at(at).at("value").get<double>() * factor;
  file[at]["source"] = "what-if";
  path = (std::filesystem::temp_directory_path() / fmt::format("tpsim_whatif_{}_{}.json", ::getpid(), std::hash<std::string>{}(pointer)))
             .string();
  std::ofstream(path) << file.dump();
}

std::vector<double> tokens_per_gpu(const std::string& hardware, const std::string& workload, int gpus) {
  const std::string json = fmt::format(R"({{"hardware": "{}", "gpus": {}, "dtype": "bf16", "workload": {},
      "variants": ["baseline", "async_tp"]}})", hardware, gpus, workload);
  std::vector<double> out;
  for (const StepVariantRun& run : run_training_step(parse_scenario(Json::parse(json), "")).runs) out.push_back(run.tokens_per_s_per_gpu);
  return out;
}

}  // namespace

TEST_CASE("Faster NVLink, NICs or HBM never slow a training step, whatever its mesh", "[step][whatif]") {
  const std::pair<const char*, int> steps[] = {
      {R"({"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 2, "mesh": {"fsdp": 16, "tp": 8}})", 128},
      {R"({"op": "training_step", "model": "llama3_70b", "seq_len": 8192, "local_batch": 4, "mesh": {"fsdp": 2, "tp": 8, "pp": 4},
           "pp_schedule": "1f1b", "activation_checkpoint": "full"})", 64}};
  const std::pair<const char*, double> faster[] = {{"/fabric/nvlink/bandwidth_per_direction", 2.0},
                                                   {"/cluster/nic/bandwidth_per_direction", 2.0},
                                                   {"/cluster/nic/latency", 0.5},
                                                   {"/memory/hbm_bandwidth", 1.5}};
  for (const auto& [workload, gpus] : steps) {
    const std::vector<double> base = tokens_per_gpu("h100_sxm", workload, gpus);
    for (const auto& [pointer, factor] : faster) {
      const WhatIfFile file(pointer, factor);
      const std::vector<double> what_if = tokens_per_gpu(file.path, workload, gpus);
      REQUIRE(what_if.size() == base.size());
      for (std::size_t v = 0; v < base.size(); ++v) {
        INFO(fmt::format("{} x{} on {} GPUs, variant {}: {:.1f} -> {:.1f} tokens/s/GPU", pointer, factor, gpus, v, base[v], what_if[v]));
        CHECK(what_if[v] >= base[v]);
      }
      // The what-if reaches the step: the 8B step's TP traffic crosses NVLink, its FSDP and PP traffic the NICs.
      if (std::string(pointer).ends_with("bandwidth_per_direction")) CHECK(what_if[0] > base[0] * 1.001);
    }
  }
}
