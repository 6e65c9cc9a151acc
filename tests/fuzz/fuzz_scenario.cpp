// Scenario parser: any bytes -> a Scenario or one InputError.
#include "fuzz_common.hpp"
#include "tpsim/io/scenario.hpp"

static tpsim::HardwareCache cache;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] { tpsim::parse_scenario(tpsim::parse_json_text(tpsim::fuzz::text_of(data, size), "fuzz"), "", &cache); });
}
