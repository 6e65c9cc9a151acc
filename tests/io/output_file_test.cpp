// Outputs are checked before work, written whole or not at all, and a failed
// write is an OutputError saying what was kept.
#include "support/catch.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tpsim/io/input_error.hpp"
#include "tpsim/io/output_file.hpp"
#include "tpsim/io/output_lock.hpp"

using namespace tpsim;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("Output paths are checked before any work", "[io][output]") {
  const fs::path dir = fs::temp_directory_path() / "tpsim_output_file_test";
  fs::create_directories(dir);
  CHECK_NOTHROW(check_output_path("-"));
  CHECK_NOTHROW(check_output_path((dir / "new.json").string()));
  CHECK_THROWS_WITH(check_output_path(dir.string()), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(check_output_path((dir / "absent" / "o.csv").string()), Catch::Contains("does not exist"));
  fs::remove_all(dir);
}

TEST_CASE("A whole file replaces the old one in one step and leaves no temporary behind", "[io][output]") {
  const fs::path dir = fs::temp_directory_path() / "tpsim_output_file_test2";
  fs::create_directories(dir);
  const fs::path f = dir / "out.json";
  write_output_file(f.string(), "first\n");
  write_output_file(f.string(), "second\n");
  CHECK(slurp(f) == "second\n");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  fs::remove_all(dir);
}

TEST_CASE("A full device is an OutputError naming what was kept, for whole files and appended rows", "[io][output]") {
  if (!fs::exists("/dev/full")) {
    WARN("no /dev/full on this machine: skipped");
    return;
  }
  CHECK_THROWS_AS(write_output_file("/dev/full", "x"), OutputError);
  CHECK_THROWS_WITH(write_output_file("/dev/full", "x"), Catch::Contains("No space left on device"));
  AppendFile rows("/dev/full");
  CHECK_THROWS_WITH(rows.append("1,2\n", "its first 7 points are whole"), Catch::Contains("its first 7 points are whole"));
}

TEST_CASE("A claimed output refuses a second claim until the first ends", "[io][output]") {
  const fs::path dir = fs::temp_directory_path() / "tpsim_output_lock_test";
  fs::create_directories(dir);
  const std::string csv = (dir / "rows.csv").string();
  {
    const OutputLock first(csv);
    CHECK(fs::exists(csv));  // created empty, so the claim has an inode to hold
    CHECK(fs::file_size(csv) == 0);
    CHECK_THROWS_AS(OutputLock(csv), InputError);
    CHECK_THROWS_WITH(OutputLock(csv), Catch::Contains("another tpsim sweep is writing it now"));
  }
  CHECK_NOTHROW(OutputLock(csv));  // released with its holder
  fs::remove_all(dir);
}
