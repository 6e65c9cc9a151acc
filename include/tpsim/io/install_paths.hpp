#pragma once
// Where the running tpsim is: an installed tree keeps its data (share/tpsim/) and its
// CUDA plugin (lib/tpsim/) relative to bin/, a build tree beside the executable.
#include <filesystem>

namespace tpsim {

// The directory of the running executable; empty where the system does not say.
inline std::filesystem::path executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

}  // namespace tpsim
