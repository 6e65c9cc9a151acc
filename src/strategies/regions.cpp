#include "regions.hpp"

#include <fmt/format.h>

#include "tpsim/strategies/eager_kernels.hpp"

namespace tpsim::strategy {

void add_gemms(Dag& dag, const Region& region, int rank, int stream, bool whole, const std::string& label) {
  for (std::size_t i = 0; i < region.gemms.size(); ++i) {
    const GemmShape& g = whole ? region.gemms[i].whole : region.gemms[i].shard;
    const std::string name = region.gemms.size() == 1 ? label : fmt::format("{}.{}", label, i);
    dag.add(rank, stream, name, GemmOp{region.problem(g)});
    if (!region.rescale_output) continue;
    for (const auto& [suffix, op] :
         rowwise_output_rescale(static_cast<double>(g.m), static_cast<double>(g.n), region.output_bytes, region.rescale_compiled))
      dag.add(rank, stream, name + "." + suffix, op);
  }
}

}  // namespace tpsim::strategy
