// PyTorch profiler (Kineto) trace import, plain or gzip-compressed: any bytes ->
// measurements or one InputError.
#include "fuzz_common.hpp"
#include "tpsim/calibration/kineto_import.hpp"
#include "tpsim/io/gzip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] {
    const std::string bytes = tpsim::fuzz::text_of(data, size);
    const tpsim::Json j = tpsim::parse_json_text(tpsim::is_gzip(bytes) ? tpsim::gunzip(bytes, "fuzz", 1 << 24) : bytes, "fuzz");
    if (!j.is_object() || !j.contains("traceEvents")) return;
    tpsim::import_kineto_trace(j, "fuzz.json");
  });
}
