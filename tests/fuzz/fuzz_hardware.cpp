// Hardware file parser: any bytes -> a HardwareSpec or one InputError.
#include "fuzz_common.hpp"
#include "tpsim/io/hardware_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] { tpsim::parse_hardware(tpsim::parse_json_text(tpsim::fuzz::text_of(data, size), "fuzz"), "fuzz"); });
}
