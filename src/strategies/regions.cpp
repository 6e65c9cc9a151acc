#include "regions.hpp"

#include <fmt/format.h>

namespace tpsim::strategy {

void add_gemms(Dag& dag, const Region& region, int rank, int stream, bool whole, const std::string& label) {
  for (std::size_t i = 0; i < region.gemms.size(); ++i) {
    const GemmShape& g = whole ? region.gemms[i].whole : region.gemms[i].shard;
    const std::string name = region.gemms.size() == 1 ? label : fmt::format("{}.{}", label, i);
    dag.add(rank, stream, name, GemmOp{region.problem(g)});
  }
}

}  // namespace tpsim::strategy
