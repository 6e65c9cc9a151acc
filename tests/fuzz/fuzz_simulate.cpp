// End to end: scenario -> simulation -> result JSON and trace. Scenarios are
// capped (small TP groups, dimensions, layers) so one input runs in milliseconds;
// the caps are the fuzzer's, not tpsim's.
#include "fuzz_common.hpp"
#include "tpsim/app/run_scenario.hpp"
#include "tpsim/report/chrome_trace.hpp"
#include "tpsim/report/result_writers.hpp"

static tpsim::HardwareCache cache;

static bool small_enough(const tpsim::Scenario& s) {
  const auto& w = s.workload;
  if (s.gpus > 8 || w.layers > 2 || w.m > 65536 || w.k > 65536 || w.tokens > 65536) return false;
  for (auto n : w.n)
    if (n > 65536) return false;
  return w.model.hidden <= 16384 && w.model.ffn_hidden <= 65536 && w.model.heads <= 128;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] {
    const tpsim::Scenario s = tpsim::parse_scenario(tpsim::parse_json_text(tpsim::fuzz::text_of(data, size), "fuzz"), "", &cache);
    if (!small_enough(s)) return;
    const tpsim::RunResult r = tpsim::run_scenario(s, true);
    tpsim::result_json(r).dump();
    tpsim::format_table(r);
    tpsim::chrome_trace(r).dump();
  });
}
