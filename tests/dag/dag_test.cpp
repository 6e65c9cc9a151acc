#include "support/catch.hpp"

#include "tpsim/dag/dag.hpp"

using namespace tpsim;

TEST_CASE("Ops on a stream depend on the previous op of that stream only", "[dag]") {
  Dag dag(2);
  const OpId a = dag.add(0, 0, "a", ElementwiseOp{1, 1});
  const OpId b = dag.add(0, 1, "b", ElementwiseOp{1, 1});
  const OpId c = dag.add(0, 0, "c", ElementwiseOp{1, 1});
  const OpId d = dag.add(1, 0, "d", ElementwiseOp{1, 1});
  CHECK(boost::edge(a, c, dag.graph()).second);
  CHECK_FALSE(boost::edge(b, c, dag.graph()).second);
  CHECK(boost::in_degree(d, dag.graph()) == 0);
  CHECK(dag.program(0) == std::vector<OpId>{a, b, c});
  CHECK(dag.streams(0) == 2);
}

TEST_CASE("A join makes the waiting stream depend on the recording stream", "[dag]") {
  Dag dag(1);
  dag.add(0, 0, "a", ElementwiseOp{1, 1});
  dag.join(0, 0, 1, "j");
  const OpId wait = dag.program(0).back();
  CHECK(std::holds_alternative<WaitOp>(dag.op(wait).payload));
  CHECK(boost::in_degree(wait, dag.graph()) == 1);
  CHECK_NOTHROW(dag.validate());
}

TEST_CASE("Waiting on an event never recorded is refused", "[dag]") {
  Dag dag(1);
  CHECK_THROWS_WITH(dag.add(0, 0, "w", WaitOp{dag.new_event()}), Catch::Matchers::Contains("never recorded"));
}
