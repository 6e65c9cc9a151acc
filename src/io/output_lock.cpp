#include "tpsim/io/output_lock.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"
#include "tpsim/io/output_file.hpp"

namespace tpsim {

OutputLock::OutputLock(const std::string& path) {
  // The file may be replaced between open and flock (a finished run's output moved
  // away): the claim counts only on the inode the path names afterwards.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw OutputError(fmt::format("{}: cannot open to claim it: {}", path, std::strerror(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        throw InputError(fmt::format("{}: another tpsim sweep is writing it now; wait for it to end or choose another -o", path));
      throw OutputError(fmt::format("{}: cannot lock it: {}", path, std::strerror(err)));
    }
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
  throw OutputError(fmt::format("{}: kept being replaced while tpsim tried to claim it", path));
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tpsim
