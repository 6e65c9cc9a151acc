// fp8 GEMM rows say how torch._scaled_mm ran them: scales and accumulation.
#include "support/catch.hpp"

#include "support/measurement_rows.hpp"
#include "support/simulate.hpp"
#include "tpsim/calibration/measurement_dag.hpp"

using namespace tpsim;
using test::error_of;
using test::h100;
using test::parse;

TEST_CASE("An fp8 GEMM row's scaling and fast accumulation reach its problem and survive a round trip", "[measurement][fp8]") {
  const auto ms = parse(R"([
      {"kind": "gemm", "m": 128, "n": 4096, "k": 16384, "dtype": "fp8", "scaling": "rowwise", "fast_accumulation": true, "time_us": 41},
      {"kind": "gemm", "m": 128, "n": 4096, "k": 16384, "dtype": "fp8", "scaling": "tensorwise", "time_us": 28},
      {"kind": "gemm", "m": 128, "n": 4096, "k": 16384, "dtype": "fp8", "time_us": 28}])");
  REQUIRE(ms.size() == 3);
  CHECK(ms[0].gemm.scaled_mm.rowwise_scales);
  CHECK(ms[0].gemm.scaled_mm.fast_accumulation);
  // Absent: tensor-wise scales without fast accumulation, torch._scaled_mm's defaults.
  for (const Measurement& m : {ms[1], ms[2]}) {
    CHECK_FALSE(m.gemm.scaled_mm.rowwise_scales);
    CHECK_FALSE(m.gemm.scaled_mm.fast_accumulation);
  }
  const Json j = measurement_json(ms[0]);
  CHECK(j.at("scaling") == "rowwise");
  CHECK(j.at("fast_accumulation") == true);
  const auto again = parse("[" + j.dump() + "]");
  CHECK(again[0].gemm == ms[0].gemm);
  CHECK_FALSE(measurement_json(ms[2]).contains("scaling"));
  // Priced as it ran: the rowwise row on cuBLAS's one outer-vector tile, slower here than tensor-wise.
  CHECK(predict_us(ms[0], h100()) > predict_us(ms[1], h100()));
}

TEST_CASE("Scales and accumulation belong to fp8 GEMM rows alone, with known names", "[measurement][fp8]") {
  CHECK(error_of(R"([{"kind": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "bf16", "scaling": "rowwise", "time_us": 1}])") ==
        "$.measurements[0].scaling: only an fp8 GEMM (torch._scaled_mm) has scales and an accumulation mode");
  CHECK(error_of(R"([{"kind": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "bf16", "fast_accumulation": true, "time_us": 1}])") ==
        "$.measurements[0].fast_accumulation: only an fp8 GEMM (torch._scaled_mm) has scales and an accumulation mode");
  CHECK(error_of(R"([{"kind": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "fp8", "scaling": "blockwise", "time_us": 1}])") ==
        "$.measurements[0].scaling: unknown scaling \"blockwise\" (tensorwise or rowwise)");
  CHECK(error_of(R"([{"kind": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "fp8", "fast_accumulation": "yes", "time_us": 1}])") !=
        "no error");
  CHECK(error_of(R"([{"kind": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "fp8", "batch": 2, "grouped": true, "scaling": "rowwise", "time_us": 1}])") ==
        "$.measurements[0].scaling: a grouped fp8 GEMM's kernel is PyTorch's, with its own tiles and accumulation");
  CHECK(error_of(R"([{"kind": "peer_copy", "bytes": 1e6, "scaling": "rowwise", "time_us": 1}])") != "no error");
}
