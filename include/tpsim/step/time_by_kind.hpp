#pragma once
// Where a training step's compute time goes, by kind of work: a layer pass split as its
// critical path in the block-level simulation splits it (gemm, attention, elementwise, the
// TP communication nothing hid, launch, ...), and the step's own work by name (embedding,
// output layer and loss, FSDP copies, optimizer).
#include <map>
#include <string>

#include "tpsim/core/tick.hpp"

namespace tpsim {

using TimeByKind = std::map<std::string, Tick>;

// `shares` scaled to sum exactly to `total` (a pass's steady-state time split as its
// one-layer run's critical path is); the rounding remainder goes to the largest share.
// No shares: all of `total` is "other".
TimeByKind scaled_to(const TimeByKind& shares, Tick total);

TimeByKind& operator+=(TimeByKind& a, const TimeByKind& b);
TimeByKind operator+(TimeByKind a, const TimeByKind& b);

Tick total(const TimeByKind& k);

}  // namespace tpsim
