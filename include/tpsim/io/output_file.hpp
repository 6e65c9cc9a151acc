#pragma once
// Every output goes through here, so nothing is lost silently: paths are checked
// before any work, whole files are written to a temporary file beside the target
// and renamed into place (a reader never sees half a file), and every write,
// flush and close is checked. A full disk is an OutputError (exit 1): not the
// user's input error, not an internal one; its message says what was kept.
#include <stdexcept>
#include <string>
#include <string_view>

namespace tpsim {

class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws InputError when `path` could not be written: a directory, a missing or
// unwritable parent directory. "-" (standard output) is always fine.
void check_output_path(const std::string& path);

// Writes `text` whole to `path` ("-": standard output), atomically for a regular file.
void write_output_file(const std::string& path, std::string_view text);

// A whole file written piece by piece (a trace too large to hold in memory): the
// pieces go to a temporary file beside `path`, and commit() moves it into place.
// Destroyed without commit(), it leaves `path` unchanged and no temporary behind.
// "-" or a device (not a regular file) is written directly.
class OutputStream {
 public:
  explicit OutputStream(const std::string& path);
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;
  ~OutputStream();
  void write(std::string_view text);  // buffered; every flush is checked
  void commit();

 private:
  void flush();
  [[noreturn]] void fail(int err);
  std::string path_, temp_;  // temp_ empty: writing `path_` (or standard output) directly
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
};

// Rows appended to a file that a later run may resume (sweep CSVs; "-": standard
// output). Each append is written through and checked; a failure names how much of
// the file is whole.
class AppendFile {
 public:
  explicit AppendFile(const std::string& path);
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();
  // `kept` is put in the error message: what the file holds whole so far.
  void append(std::string_view text, const std::string& kept);
  void close();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace tpsim
