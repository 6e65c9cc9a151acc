#include "tpsim/hw/copy_engines.hpp"

#include <algorithm>
#include <memory>

namespace tpsim {

CopyEngines::CopyEngines(Simulator& sim, Fabric& fabric, const CopyEngineSpec& spec)
    : sim_(sim), fabric_(fabric), spec_(spec),
      queues_(static_cast<std::size_t>(std::max(1, spec.p2p_engines))),
      busy_(queues_.size(), 0) {}

void CopyEngines::submit(CopyRequest req) {
  // The least-loaded engine, lowest index on ties: deterministic.
  std::size_t best = 0;
  for (std::size_t e = 1; e < queues_.size(); ++e)
    if (queues_[e].size() + busy_[e] < queues_[best].size() + busy_[best]) best = e;
  queues_[best].push_back(std::move(req));
  if (!busy_[best]) start_next(static_cast<int>(best));
}

void CopyEngines::start_next(int engine) {
  auto& q = queues_[static_cast<std::size_t>(engine)];
  if (q.empty()) {
    busy_[static_cast<std::size_t>(engine)] = 0;
    return;
  }
  busy_[static_cast<std::size_t>(engine)] = 1;
  auto req = std::make_shared<CopyRequest>(std::move(q.front()));
  q.pop_front();
  if (req->on_start) req->on_start(engine);
  sim_.schedule_after(spec_.latency, [this, engine, req] {
    auto done = [this, engine, req] {
      if (req->on_done) req->on_done();
      start_next(engine);
    };
    if (req->src == req->dst) {
      sim_.schedule_after(duration_for(req->bytes, spec_.bytes_per_ps), done);
    } else {
      fabric_.start(req->src, req->dst, req->bytes, spec_.bytes_per_ps, done);
    }
  });
}

}  // namespace tpsim
