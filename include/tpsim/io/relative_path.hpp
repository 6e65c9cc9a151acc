#pragma once
// One rule for relative paths, so a file gives the same result wherever tpsim runs:
// a path written inside a file is relative to that file's directory; a path given
// on the command line (no referencing file: `dir` empty) to the working directory.
#include <filesystem>
#include <string>

namespace tpsim {

inline std::filesystem::path resolve_relative(const std::string& ref, const std::string& dir) {
  const std::filesystem::path p(ref);
  if (p.is_absolute() || dir.empty()) return p;
  return std::filesystem::path(dir) / p;
}

}  // namespace tpsim
