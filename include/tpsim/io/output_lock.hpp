#pragma once
// An exclusive claim on an output file that a long run appends to (a sweep's CSV):
// a second tpsim writing the same file would interleave its rows with the first's.
// flock(2) on the file itself, so the claim ends with the process however it ends
// (a kill -9 leaves nothing stale to clean up).
#include <string>

namespace tpsim {

class OutputLock {
 public:
  // Creates `path` empty if it does not exist. Throws InputError when another
  // process holds the claim.
  explicit OutputLock(const std::string& path);
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock();

 private:
  int fd_ = -1;
};

}  // namespace tpsim
