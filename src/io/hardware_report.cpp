#include "tpsim/io/hardware_report.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tpsim/io/hardware_loader.hpp"
#include "tpsim/io/input_error.hpp"

namespace tpsim {

namespace {

bool is_quantity(const Json& j) { return j.is_object() && j.contains("value") && j.contains("unit"); }

void flatten(const Json& j, const std::string& path, std::string& out) {
  if (is_quantity(j)) {
    out += fmt::format("  {:<46} {:>10} {:<8} {}\n", path, j["value"].dump(), j["unit"].get<std::string>(),
                       j.value("source", std::string()));
    return;
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, path.empty() ? k : path + "." + k, out);
  } else if (j.is_array() && std::all_of(j.begin(), j.end(), [](const Json& e) { return e.is_string(); })) {
    std::vector<std::string> items;  // a list of names (a tile's dtypes): one line
    for (const auto& e : j) items.push_back(e.get<std::string>());
    out += fmt::format("  {:<46} {}\n", path, fmt::join(items, ", "));
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) flatten(j[i], fmt::format("{}[{}]", path, i), out);
  } else if (path != "name" && path != "description") {
    out += fmt::format("  {:<46} {}\n", path, j.is_string() ? j.get<std::string>() : j.dump());
  }
}

}  // namespace

std::string hardware_list() {
  std::string out = fmt::format("{:<16} {:>5} {:>11} {:>14} {:>9} {:<11} {:>14}  {}\n", "name", "SMs", "bf16 TF/s", "power limit",
                                "HBM TB/s", "topology", "link GB/s/dir", "description");
  const auto names = shipped_hardware_names();
  if (names.empty())
    throw InputError(fmt::format("no hardware models in {} (set TPSIM_MODELS_DIR to the models directory)", models_dir()));
  for (const auto& name : names) {
    const HardwareSpec hw = load_hardware_file(models_dir() + "/" + name + ".json");
    // The limit, and the tensor-core speed it leaves where it binds (the peak column is nominal).
    const std::string power = hw.power.limit_w <= 0 ? "-"
                              : hw.power.tensor_speed() < 1.0 ? fmt::format("{:g} W: x{:.3f}", hw.power.limit_w, hw.power.tensor_speed())
                                                      : fmt::format("{:g} W", hw.power.limit_w);
    out += fmt::format("{:<16} {:>5} {:>11.0f} {:>14} {:>9.2f} {:<11} {:>14.0f}  {}\n", name, hw.sm.count,
                       hw.peak_flops_per_ps[static_cast<int>(Dtype::bf16)], power, hw.memory.hbm_bytes_per_ps,
                       hw.fabric.topology, hw.fabric.nvlink.bytes_per_ps * 1e3, hw.description);
  }
  return out;
}

std::string hardware_show(const std::string& ref) {
  const HardwareSpec hw = resolve_hardware(ref, "hardware", "");  // validates the whole file
  const bool is_path = ref.find('/') != std::string::npos || ref.ends_with(".json");
  const Json j = resolve_hardware_json(is_path ? ref : models_dir() + "/" + ref + ".json");
  std::string out = fmt::format("{}: {}\n", hw.name, hw.description);
  flatten(j, "", out);
  return out;
}

}  // namespace tpsim
