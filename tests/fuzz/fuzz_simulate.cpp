// End to end: scenario -> simulation -> result JSON and trace. Scenarios are
// capped (small TP groups, dimensions, layers) so one input runs in milliseconds;
// the caps are the fuzzer's, not tpsim's.
#include "fuzz_common.hpp"
#include "tpsim/app/run_scenario.hpp"
#include "tpsim/io/scenario.hpp"
#include "tpsim/report/chrome_trace.hpp"
#include "tpsim/report/result_writers.hpp"
#include "tpsim/report/step_result_writers.hpp"
#include "tpsim/report/step_trace.hpp"

static tpsim::HardwareCache cache;

static bool small_enough(const tpsim::Scenario& s) {
  const auto& w = s.workload;
  if (w.op == "training_step") {
    const auto& t = w.step;
    return s.gpus <= 4096 && t.model.layers <= 8 && t.model.hidden <= 8192 && t.model.ffn_hidden <= 32768 && t.model.heads <= 64 &&
           t.microbatches <= 16 && t.microbatch_tokens() <= 65536 && t.model.vocab <= 262144;
  }
  if (s.gpus > 8 || w.layers > 2 || w.m > 65536 || w.k > 65536 || w.tokens > 65536) return false;
  for (auto n : w.n)
    if (n > 65536) return false;
  return w.model.hidden <= 16384 && w.model.ffn_hidden <= 65536 && w.model.heads <= 128;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tpsim::fuzz::expect_clean([&] {
    const tpsim::Scenario s = tpsim::parse_scenario(tpsim::parse_json_text(tpsim::fuzz::text_of(data, size), "fuzz"), "", &cache);
    if (!small_enough(s)) return;
    if (s.workload.op == "training_step") {
      const tpsim::StepResult r = tpsim::run_training_step(s);
      tpsim::step_result_json(r).dump();
      tpsim::format_step_table(r);
      tpsim::step_trace(r).dump();
      return;
    }
    const tpsim::RunResult r = tpsim::run_scenario(s, true);
    tpsim::result_json(r).dump();
    tpsim::format_table(r);
    tpsim::chrome_trace(r).dump();
  });
}
