// PyTorch profiler (Kineto) traces read as measurements: GEMMs through their aten op, NCCL
// kernels by their sizes, peer copies alone or beside one GEMM, and what is left out and why.
#include "support/catch.hpp"

#include <stdexcept>

#include "support/simulate.hpp"
#include "tpsim/calibration/kineto_import.hpp"
#include "tpsim/calibration/measurement.hpp"
#include "tpsim/calibration/measurement_dag.hpp"

using namespace tpsim;

namespace {

const Measurement& named(const std::vector<Measurement>& ms, const std::string& name) {
  for (const auto& m : ms)
    if (m.name == name) return m;
  throw std::logic_error("no measurement " + name);
}

}  // namespace

TEST_CASE("Kineto import: GEMMs through their aten op, split-K kernels spanned, repeats at the median, NCCL by args, peer copies",
          "[measurement][kineto]") {
  const auto ms = load_measurements_file(std::string(TPSIM_SOURCE_DIR) + "/tests/calibration/data/kineto_small.json");
  // Two GEMM shapes, one all-gather, one reduce-scatter, one all-reduce, one peer copy; the add
  // and the local (DtoD) copy skipped.
  REQUIRE(ms.size() == 6);
  const Measurement& ar = named(ms, "kineto all_reduce 4096 B x8");
  CHECK(ar.kind == MeasurementKind::all_reduce);
  CHECK(ar.time_us == Approx(50));
  CHECK(named(ms, "kineto peer_copy 67108864 B").time_us == Approx(170.5));
  const Measurement& big = named(ms, "kineto gemm 4096x1024x8192 bf16");
  CHECK(big.kind == MeasurementKind::gemm);
  CHECK(big.time_us == Approx(92));  // median of 90, 94, 92
  const Measurement& addmm = named(ms, "kineto gemm 256x1024x4096 fp16");
  CHECK(addmm.time_us == Approx(12));  // the GEMM kernel and its split-K reduce: 710 .. 722
  const Measurement& ag = named(ms, "kineto all_gather 33554432 B x8");
  CHECK(ag.gpus == 8);
  CHECK(ag.time_us == Approx(120));
  const Measurement& rs = named(ms, "kineto reduce_scatter 33554432 B x8");
  CHECK(rs.time_us == Approx(130));
}

TEST_CASE("Kineto import of older traces: sizes on record_param_comms, group from its ranks, old categories, fp8",
          "[measurement][kineto]") {
  const auto ms = import_kineto_trace(Json::parse(R"j({"traceEvents": [
      {"ph": "X", "cat": "Operator", "name": "record_param_comms", "ts": 10, "dur": 30,
       "args": {"External id": 7, "Collective name": "reduce_scatter_tensor", "dtype": "Float", "In msg nelems": 1048576,
                "Out msg nelems": 262144, "Process Group Ranks": "[0, 1, 2, 3]"}},
      {"ph": "X", "cat": "Kernel", "name": "ncclKernel_ReduceScatter_RING_LL_Sum_float(ncclWorkElem)", "ts": 20, "dur": 40,
       "args": {"External id": 7}},
      {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 100, "dur": 30,
       "args": {"External id": 8, "Collective name": "all_gather_into_tensor", "dtype": "BFloat16", "In msg nelems": 512,
                "Out msg nelems": 1024, "Process Group Ranks": [4, 5]}},
      {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ts": 120,
       "dur": 9, "args": {"External id": 8}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_mm", "ts": 200, "dur": 5, "args": {"External id": 9,
       "Input Dims": [[2048, 4096], [4096, 8192], [], []], "Input type": ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"]}},
      {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n", "ts": 210, "dur": 25, "args": {"External id": 9}}]})j"),
                                      "old.json");
  REQUIRE(ms.size() == 3);
  CHECK(named(ms, "kineto reduce_scatter 4194304 B x4").time_us == Approx(40));
  CHECK(named(ms, "kineto all_gather 2048 B x2").time_us == Approx(9));
  const Measurement& fp8 = named(ms, "kineto gemm 2048x8192x4096 fp8");
  CHECK(fp8.gemm.dtype == Dtype::fp8);
  CHECK(fp8.time_us == Approx(25));
}

TEST_CASE("Kineto import reads how _scaled_mm ran: rowwise scales from their shape, use_fast_accum from its concrete input",
          "[measurement][kineto][fp8]") {
  const auto ms = import_kineto_trace(Json::parse(R"j({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_mm", "args": {"External id": 1,
       "Input Dims": [[2048, 4096], [4096, 128], [2048, 1], [1, 128], [], [], [], []],
       "Input type": ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "", "", "ScalarType", "Scalar"],
       "Concrete Inputs": ["", "", "", "", "", "", "15", "True"]}},
      {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_qqtst_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_TNT", "ts": 0, "dur": 20,
       "args": {"External id": 1}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_mm", "args": {"External id": 2,
       "Input Dims": [[2048, 4096], [4096, 128], [], [], [], [], [], []],
       "Input type": ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "", "", "ScalarType", "Scalar"],
       "Concrete Inputs": ["", "", "", "", "", "", "15", "False"]}},
      {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_qqtst_64x64_128x13_1x2_h_bz_algo2_TNT", "ts": 100, "dur": 12,
       "args": {"External id": 2}}]})j"),
                                      "fp8.json");
  REQUIRE(ms.size() == 2);
  const Measurement& rowwise = named(ms, "kineto gemm 2048x128x4096 fp8 rowwise fast accumulation");
  CHECK(rowwise.gemm.scaled_mm.rowwise_scales);
  CHECK(rowwise.gemm.scaled_mm.fast_accumulation);
  const Measurement& tensorwise = named(ms, "kineto gemm 2048x128x4096 fp8");
  CHECK_FALSE(tensorwise.gemm.scaled_mm.rowwise_scales);
  CHECK_FALSE(tensorwise.gemm.scaled_mm.fast_accumulation);
  // A use_fast_accum that is no boolean is refused with its JSON path.
  try {
    import_kineto_trace(Json::parse(R"j({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_mm", "args": {"External id": 1,
       "Input Dims": [[64, 64], [64, 64], [], [], [], [], [], []], "Input type": ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn"],
       "Concrete Inputs": ["", "", "", "", "", "", "", "maybe"]}},
      {"ph": "X", "cat": "kernel", "name": "g", "ts": 0, "dur": 2, "args": {"External id": 1}}]})j"),
                        "bad.json");
    FAIL("a bad use_fast_accum was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "$.traceEvents[0].args.\"Concrete Inputs\"[7]: use_fast_accum must be \"True\" or \"False\", got \"maybe\"");
  }
}

TEST_CASE("Kineto import leaves out GEMMs that ran beside communication on their GPU", "[measurement][kineto]") {
  // Three runs of one GEMM on GPU 0: the second overlaps an unsized NCCL kernel there, the
  // third a peer copy on GPU 1 only (another GPU: it stays).
  const auto ms = import_kineto_trace(Json::parse(R"j({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"External id": 1, "Input Dims": [[4096, 4096], [4096, 4096]],
       "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"External id": 2, "Input Dims": [[4096, 4096], [4096, 4096]],
       "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"External id": 3, "Input Dims": [[4096, 4096], [4096, 4096]],
       "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
      {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "ts": 0, "dur": 150, "args": {"External id": 1, "device": 0}},
      {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "ts": 200, "dur": 190, "args": {"External id": 2, "device": 0}},
      {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "ts": 250, "dur": 80, "args": {"device": 0}},
      {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "ts": 400, "dur": 152, "args": {"External id": 3, "device": 0}},
      {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 1, "ts": 420, "dur": 100,
       "args": {"device": 1, "bytes": 1048576}}]})j"),
                                      "busy.json");
  const Measurement& g = named(ms, "kineto gemm 4096x4096x4096 bf16");
  CHECK(g.time_us == Approx(151));  // the median of the two alone, not the 190 us slowed one
  CHECK(g.source == "busy.json: median of 2 kernel(s); 1 more ran beside communication and were left out");
  CHECK(named(ms, "kineto peer_copy 1048576 B").time_us == Approx(100));
}

TEST_CASE("Kineto import: a peer copy inside one GEMM on its GPU is a copy beside that GEMM, one partly beside is left out",
          "[measurement][kineto]") {
  // On GPU 0 a GEMM from 0 to 150 us: a 4 MiB pull wholly inside it, another from 140 to 200
  // (partly beside), and a third alone at 300.
  const auto ms = import_kineto_trace(Json::parse(R"j({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"External id": 1, "Input Dims": [[128, 16384], [16384, 6656]],
       "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
      {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst", "pid": 0, "ts": 0, "dur": 150, "args": {"External id": 1, "device": 0}},
      {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "ts": 20, "dur": 40,
       "args": {"device": 0, "bytes": 4194304}},
      {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "ts": 140, "dur": 60,
       "args": {"device": 0, "bytes": 4194304}},
      {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "ts": 300, "dur": 12,
       "args": {"device": 0, "bytes": 4194304}}]})j"),
                                      "pulls.json");
  REQUIRE(ms.size() == 2);  // the GEMM ran beside copies: not a GEMM alone
  const Measurement& beside = named(ms, "kineto peer copy 4194304 B beside gemm 128x6656x16384 bf16");
  CHECK(beside.kind == MeasurementKind::peer_copy_with_gemm);
  CHECK(beside.time_us == Approx(40));
  CHECK(beside.gemm.m == 128);
  const Measurement& alone = named(ms, "kineto peer_copy 4194304 B");
  CHECK(alone.time_us == Approx(12));
  CHECK(alone.source == "pulls.json: median of 1 kernel(s); 1 more ran partly beside GEMMs and were left out");
  // What it says of the pull beside the GEMM, tpsim predicts: a copy no faster than alone.
  CHECK(predict_us(beside, test::h100()) >= predict_us(alone, test::h100()) * (1 - 1e-9));
  // A trace whose only copy ran partly beside a GEMM holds nothing to measure, and says why.
  try {
    import_kineto_trace(Json::parse(R"j({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"External id": 1, "Input Dims": [[128, 16384], [16384, 6656]],
         "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
        {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst", "pid": 0, "ts": 0, "dur": 150, "args": {"External id": 1, "device": 0}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "ts": 140, "dur": 60,
         "args": {"device": 0, "bytes": 4194304}}]})j"),
                        "partly.json");
    FAIL("a trace with nothing to measure was imported");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "$.traceEvents: holds no measurement: its GEMM kernels ran beside communication, its peer copies partly beside GEMMs, and no "
          "collective is sized");
  }
}

TEST_CASE("Bad Kineto traces get one line naming the event", "[measurement][kineto]") {
  auto err = [](const std::string& text) {
    try {
      import_kineto_trace(Json::parse(text), "t.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err(R"({"traceEvents": 3})") == "$.traceEvents: must be an array");
  CHECK(err(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "elementwise", "dur": 3, "ts": 1}]})")
            .starts_with("$.traceEvents: holds no GEMM kernel"));
  CHECK(err(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather", "ts": 1, "dur": -2,
                 "args": {"Collective name": "allgather"}}]})") == "$.traceEvents[0].dur: must be a positive number, got -2");
  // A collective kernel sized nowhere is not a measurement.
  CHECK(err(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather", "ts": 1, "dur": 2,
                 "args": {"External id": 4}}]})").starts_with("$.traceEvents: holds no"));
  // Sizes found on the linked record_param_comms op are checked there.
  CHECK(err(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "args": {"External id": 4,
                 "Collective name": "_allgather_base", "dtype": "BFloat16", "Out msg nelems": 64, "Process Group Ranks": "[0]"}},
               {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather", "ts": 1, "dur": 2, "args": {"External id": 4}}]})") ==
        R"($.traceEvents[0].args."Process Group Ranks": must give a group of 2 to 64 GPUs)");
  CHECK(err(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather", "ts": 1, "dur": 2,
                 "args": {"Collective name": "allgather", "dtype": "BFloat16", "Out msg nelems": 8}}]})") ==
        R"($.traceEvents[0].args: missing "Group size")");
  CHECK(err(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"External id": 1,
                 "Input Dims": [[4, 8], [16, 2]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
               {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 2, "args": {"External id": 1}}]})") ==
        R"($.traceEvents[0].args."Input Dims": inner dimensions differ (8 and 16))");
  CHECK(err(R"({"traceEvents": [{"ph": "X", "cat": 7, "name": ["x"]}, {"ph": 1}]})").starts_with("$.traceEvents: holds no"));
}
