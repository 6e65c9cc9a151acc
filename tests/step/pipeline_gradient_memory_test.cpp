#include "support/catch.hpp"

#include <fmt/format.h>

#include "tpsim/io/scenario.hpp"
#include "tpsim/step/memory_ledger.hpp"

using namespace tpsim;

namespace {

Scenario step(const std::string& mesh, const std::string& extra = "") {
  return parse_scenario(Json::parse(fmt::format(R"({{"hardware": "h100_sxm", "gpus": 64, "dtype": "bf16",
      "workload": {{"op": "training_step", "model": "llama3_8b", "seq_len": 8192, "local_batch": 8,
                    "mesh": {{{}}}, "activation_checkpoint": "full"{}}}, "variants": ["baseline"]}})",
                                                mesh, extra.empty() ? "" : ", " + extra)),
                        "");
}
double part(const MemoryLedger& l, const std::string& kind) {
  for (const auto& [k, b] : l.parts)
    if (k == kind) return b;
  return -1;
}

}  // namespace

TEST_CASE("with a pipeline FSDP holds the stage's unsharded gradients in the reduce dtype until the last backward", "[step][memory]") {
  StageMemoryInput in;
  in.local_params = 1e9, in.shard_params = 1e9 / 8, in.largest_layer = 1e8, in.edge_params = 0;
  const Scenario pp = step(R"("pp": 8, "fsdp": 8)"), pp_bf16 = step(R"("pp": 8, "fsdp": 8)", R"("grad_reduce_dtype": "bf16")");
  const Scenario flat = step(R"("fsdp": 64)");
  const MemoryLedger a = stage_memory(pp.workload.step, in, pp.hardware, 2), b = stage_memory(pp_bf16.workload.step, in, pp.hardware, 2);
  const MemoryLedger c = stage_memory(flat.workload.step, in, flat.hardware, 2);
  // fp32: twice the bf16 parameters FSDP keeps gathered; bf16: as many bytes.
  CHECK(part(a, "FSDP unsharded gradients") == Approx(4 * in.local_params));
  CHECK(part(a, "FSDP unsharded gradients") == Approx(2 * part(a, "FSDP gathered parameters (bf16)")));
  CHECK(part(b, "FSDP unsharded gradients") == Approx(part(b, "FSDP gathered parameters (bf16)")));
  // Without a pipeline each layer's are reduce-scattered at once: two layers' at a time.
  CHECK(part(c, "FSDP unsharded gradients") == Approx(4 * 2 * in.largest_layer));
}
