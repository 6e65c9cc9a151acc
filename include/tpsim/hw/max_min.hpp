#pragma once
// Max-min fair rates by progressive filling: every flow's rate rises together until a
// resource it crosses is full or it reaches its own cap; those flows keep that rate and the
// others go on rising. The fabric's transfers and collectives priced as flows share it.
#include <vector>

namespace tpsim {

// paths[i]: indices into `capacity` of the resources flow i crosses (each at most once);
// cap[i]: flow i's own limit (infinity for none). `weight[i]` (1 when empty) bundles that many
// identical flows on one path: they count so many times on each resource, and the rate
// returned is each one's. No resource is given more than its capacity.
std::vector<double> max_min_rates(const std::vector<std::vector<int>>& paths, std::vector<double> capacity,
                                  const std::vector<double>& cap, const std::vector<double>& weight = {});

// The same where a flow puts more on some resources than its payload: `use` holds, flow after
// flow in path order, what one payload byte takes of each resource on the flow's path (a link
// carrying a protocol's overhead besides the payload takes more than one; the memory at either
// end, one). The rates returned are payload rates.
std::vector<double> max_min_rates_on_wire(const std::vector<std::vector<int>>& paths, std::vector<double> capacity,
                                          const std::vector<double>& cap, const std::vector<double>& use);

}  // namespace tpsim
