#include "tpsim/io/output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tpsim/io/input_error.hpp"

namespace tpsim {

namespace fs = std::filesystem;

namespace {

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// write(2) until everything is out; false (errno set) on failure.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

[[noreturn]] void fail_writing(const std::string& path, int err, const std::string& kept) {
  throw OutputError(fmt::format("{}: cannot write ({}); {}", path, std::strerror(err), kept));
}

}  // namespace

void check_output_path(const std::string& path) {
  if (path == "-") return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory; name a file to write", path));
  const std::string dir = parent_of(path);
  if (!fs::is_directory(dir, ec)) throw InputError(fmt::format("{}: directory {} does not exist", path, dir));
  if (::access(dir.c_str(), W_OK) != 0) throw InputError(fmt::format("{}: cannot write in directory {}", path, dir));
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) throw InputError(fmt::format("{}: is not writable", path));
}

void write_output_file(const std::string& path, std::string_view text) {
  OutputStream out(path);
  out.write(text);
  out.commit();
}

OutputStream::OutputStream(const std::string& path) : path_(path) {
  if (path == "-") {
    // Text already printed (through stdio, which std::cout is synced with) goes first.
    std::fflush(stdout);
    fd_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    path_ = "standard output";
    if (fd_ < 0) fail_writing(path_, errno, "nothing was written");
    return;
  }
  check_output_path(path);
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {  // a device or pipe: nothing to rename over
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail_writing(path, errno, "nothing was written");
    return;
  }
  std::string temp = path + ".tmp-XXXXXX";
  std::vector<char> name(temp.begin(), temp.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) fail_writing(path, errno, fmt::format("nothing was written, {} is unchanged", path));
  temp_ = name.data();
}

OutputStream::~OutputStream() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void OutputStream::fail(int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    fail_writing(path_, err, fmt::format("nothing was written, {} is unchanged", path_));
  }
  fail_writing(path_, err, "the output is incomplete");
}

void OutputStream::flush() {
  if (!write_all(fd_, buffer_)) fail(errno);
  buffer_.clear();
}

void OutputStream::write(std::string_view text) {
  buffer_ += text;
  if (buffer_.size() >= (1u << 20)) flush();
}

void OutputStream::commit() {
  flush();
  const int fd = fd_;
  fd_ = -1;
  if (temp_.empty()) {
    if (::close(fd) != 0) fail(errno);
    committed_ = true;
    return;
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail(err);
  }
  if (::close(fd) != 0) fail(errno);
  // mkstemp creates 0600; an output file gets the usual permissions.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::chmod(temp_.c_str(), 0666 & ~mask) != 0 || std::rename(temp_.c_str(), path_.c_str()) != 0) fail(errno);
  committed_ = true;
}

AppendFile::AppendFile(const std::string& path) : path_(path == "-" ? "standard output" : path) {
  fd_ = path == "-" ? ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0) : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) fail_writing(path, errno, "nothing was written");
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(std::string_view text, const std::string& kept) {
  if (!write_all(fd_, text)) fail_writing(path_, errno, kept);
}

void AppendFile::close() {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && (::fsync(fd) != 0 || ::close(fd) != 0)) fail_writing(path_, errno, "its last rows may be incomplete");
}

}  // namespace tpsim
