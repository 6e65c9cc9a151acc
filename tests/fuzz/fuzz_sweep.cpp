// Sweep file parser and point expansion: the first points' scenarios are built and parsed too.
#include <algorithm>

#include "fuzz_common.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/sweep/sweep_spec.hpp"

static tpsim::HardwareCache cache;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] {
    const tpsim::SweepSpec spec = tpsim::parse_sweep(tpsim::fuzz::text_of(data, size), "");
    for (std::int64_t p = 0; p < std::min<std::int64_t>(spec.points(), 8); ++p) {
      for (const auto& v : spec.values_of(p)) tpsim::value_text(v);
      tpsim::parse_scenario(spec.scenario_of(p), spec.base_dir, &cache);
    }
  });
}
