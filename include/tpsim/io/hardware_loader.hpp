#pragma once
// Hardware files (models/*.json): every number is {"value", "unit", "source"};
// units are converted here, once, into simulator units.
#include <string>
#include <vector>

#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

HardwareSpec parse_hardware(const Json& j, const std::string& source);
HardwareSpec load_hardware_file(const std::string& file);
// The file's JSON with any "base" it names merged in (what `hardware show` prints).
Json resolve_hardware_json(const std::string& file);

// Where the shipped models live: $TPSIM_MODELS_DIR, else the source tree's models/.
std::string models_dir();

// Why `hw` cannot run `d` (when !hw.computes(d)): one wording for scenarios and measurements.
std::string missing_dtype_message(const HardwareSpec& hw, Dtype d);
std::vector<std::string> shipped_hardware_names();
// A name ("h100_sxm") or a path to a JSON file (tried as given, then against
// `relative_to`): the file it means. Errors name `json_path`.
std::string hardware_file_path(const std::string& ref, const std::string& json_path, const std::string& relative_to);
HardwareSpec resolve_hardware(const std::string& ref, const std::string& json_path, const std::string& relative_to);

}  // namespace tpsim
