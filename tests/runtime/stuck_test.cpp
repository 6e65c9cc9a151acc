// A DAG that cannot finish ends with one clear error naming where each rank is
// stuck, never a hang.
#include "support/catch.hpp"

#include "support/simulate.hpp"
#include "tpsim/core/invariant.hpp"

using namespace tpsim;
using namespace tpsim::test;
using Catch::Matchers::Contains;

TEST_CASE("Stuck: a barrier one rank never reaches", "[stuck]") {
  Dag dag(2);
  const int g = dag.new_group();
  dag.add(0, 0, "lonely barrier", BarrierOp{g});
  dag.add(1, 0, "other work", ElementwiseOp{1e6, 1e6});
  CHECK_THROWS_WITH(execute(dag, h100()), Contains("stuck: rank 0 stream 0 at 'lonely barrier'"));
}

TEST_CASE("Stuck: a cycle across ranks (barriers met in opposite orders)", "[stuck]") {
  Dag dag(2);
  const int a = dag.new_group(), b = dag.new_group();
  dag.add(0, 0, "barrier A", BarrierOp{a});
  dag.add(0, 0, "barrier B", BarrierOp{b});
  dag.add(1, 0, "barrier B", BarrierOp{b});
  dag.add(1, 0, "barrier A", BarrierOp{a});
  CHECK_THROWS_WITH(execute(dag, h100()),
                    Contains("rank 0 stream 0 at 'barrier A'") && Contains("rank 1 stream 0 at 'barrier B'"));
}

TEST_CASE("Stuck: a collective with a rank missing, while another stream waits on it", "[stuck]") {
  Dag dag(2);
  const int g = dag.new_group();
  dag.add(0, 0, "all_gather", CollectiveOp{CollectiveKind::all_gather, 1e6, g});
  dag.join(0, 0, 1, "after");
  dag.add(0, 1, "needs the gather", ElementwiseOp{1e6, 1e6});
  CHECK_THROWS_WITH(execute(dag, h100()),
                    Contains("rank 0 stream 0 at 'all_gather'") && Contains("rank 0 stream 1 at 'after.wait'"));
}

TEST_CASE("Stuck: a wait on an event that is never recorded is refused when built", "[stuck]") {
  Dag dag(1);
  dag.add(0, 0, "work", ElementwiseOp{1e6, 1e6});
  CHECK_THROWS_WITH(dag.add(0, 1, "orphan wait", WaitOp{dag.new_event()}),
                    Contains("rank 0 stream 1 'orphan wait': wait on event 0 that is never recorded"));
}

TEST_CASE("Limits: an op graph past the bound stops with a clear error", "[limits]") {
  CHECK_THROWS_AS(simulate(R"({"hardware": "h100_sxm_2node", "gpus": 64, "dtype": "bf16",
      "workload": {"op": "transformer_layer", "model": "llama3_405b", "tokens": 65536, "seq_len": 8192,
                   "pass": "forward_backward", "layers": 1000}, "variants": ["async_tp_nccl"]})"),
                  SimulationLimit);
}
