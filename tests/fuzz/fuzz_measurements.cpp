// Measurement-file parser (and tpsim-result import): any bytes -> measurements or one InputError.
#include "fuzz_common.hpp"
#include "tpsim/calibration/measurement.hpp"
#include "tpsim/calibration/result_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] {
    const tpsim::Json j = tpsim::parse_json_text(tpsim::fuzz::text_of(data, size), "fuzz");
    if (j.is_object() && j.contains("results")) tpsim::import_result_json(j, "fuzz.json");
    else tpsim::parse_measurements(j, "fuzz.json");
  });
}
