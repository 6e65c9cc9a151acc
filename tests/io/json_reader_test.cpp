// Reading inputs: a repeated key, a directory, a device or an oversized file is
// one InputError naming what is wrong, never a silent choice or a huge read.
#include "support/catch.hpp"

#include <filesystem>
#include <fstream>

#include "tpsim/io/json_reader.hpp"
#include "tpsim/io/printable.hpp"

using namespace tpsim;
using Catch::Matchers::Contains;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_json_text(text, "in.json"); });
}

}  // namespace

TEST_CASE("A key given twice is an error naming the object's JSON path", "[io]") {
  CHECK(parse_error(R"({"gpus": 8, "gpus": 4})") ==
        R"(in.json: $: duplicate key "gpus" (JSON readers disagree on which value wins))");
  CHECK_THAT(parse_error(R"({"workload": {"m": 1, "k": 2, "m": 3}})"), Contains(R"($.workload: duplicate key "m")"));
  CHECK_THAT(parse_error(R"({"rows": [1, {"a": 1}, [2, 3], {"b": 1, "b": 2}]})"), Contains(R"($.rows[3]: duplicate key "b")"));
  CHECK_THAT(parse_error(R"({"a": {"x": {"y": 1}}, "b": [{"x": 1}, {"x": 2, "y": [1, {"z": 1, "z": 1}]}]})"),
             Contains(R"($.b[1].y[1]: duplicate key "z")"));
  // The same key in sibling objects is not a repeat.
  CHECK(parse_json_text(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})", "in.json")["c"][1]["x"] == 2);
}

TEST_CASE("Only regular files are read, and none larger than the bound", "[io]") {
  const auto dir = std::filesystem::temp_directory_path() / "tpsim_json_reader_test";
  std::filesystem::create_directories(dir);
  CHECK(error_of([&] { read_json_file(dir.string()); }) == dir.string() + ": is a directory, not a file");
  CHECK(error_of([&] { read_json_file((dir / "absent.json").string()); }) == (dir / "absent.json").string() + ": no such file");
  if (std::filesystem::exists("/dev/zero"))
    CHECK_THAT(error_of([] { read_json_file("/dev/zero"); }), Contains("/dev/zero: not a regular file"));
  const auto big = dir / "big.json";
  std::ofstream(big) << std::string(100, ' ') << "{}";
  CHECK(read_input_file(big.string(), 102).size() == 102);
  CHECK(error_of([&] { read_input_file(big.string(), 101); }) == big.string() + ": larger than 101 bytes, more than any tpsim input needs");
  std::filesystem::remove_all(dir);
}

TEST_CASE("User text is made printable: control bytes become hex escapes, the rest is kept", "[io]") {
  CHECK(printable("plain text, with | and \"quotes\"") == "plain text, with | and \"quotes\"");
  CHECK(printable("a\nb") == "a\\x0ab");
  CHECK(printable("\x1b[2J") == "\\x1b[2J");
  CHECK(printable(std::string("nul\0end", 7)) == "nul\\x00end");
  CHECK(printable("\x7f") == "\\x7f");
  CHECK(printable("h\xc3\xa9") == "h\xc3\xa9");  // UTF-8 stays as written
}

TEST_CASE("Extents like 128x256x64: exactly so many whole numbers joined by x, each in range", "[io]") {
  CHECK(parse_extents("128x256x64", 3, 4096) == std::vector<int>{128, 256, 64});
  CHECK(parse_extents("128x128", 2, 4096) == std::vector<int>{128, 128});
  for (const char* bad : {"128x256", "128x256x64x1", "0x1x1", "+1x2x3", "1 x2x3", "5000x1x1", "12ax3x4", "x1x2", "1x2x", "", "-1x2x3"})
    CHECK_FALSE(parse_extents(bad, 3, 4096).has_value());
}
