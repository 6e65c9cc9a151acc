// PyTorch profiler (Kineto) trace import: any bytes -> measurements or one InputError.
#include "fuzz_common.hpp"
#include "tpsim/calibration/kineto_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] {
    const tpsim::Json j = tpsim::parse_json_text(tpsim::fuzz::text_of(data, size), "fuzz");
    if (!j.is_object() || !j.contains("traceEvents")) return;
    tpsim::import_kineto_trace(j, "fuzz.json");
  });
}
