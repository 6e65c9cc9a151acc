// Gzip input: what zlib deflates comes back byte for byte; damage is one clear error.
#include "support/catch.hpp"

#include <filesystem>
#include <fstream>

#include <unistd.h>
#include <zlib.h>

#include <fmt/format.h>

#include "tpsim/calibration/measurement.hpp"
#include "tpsim/io/gzip.hpp"
#include "tpsim/io/json_reader.hpp"

using namespace tpsim;

namespace {

std::string gzip(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(static_cast<std::size_t>(z.total_out));
  deflateEnd(&z);
  return out;
}

std::string error_of(const std::string& bytes, std::size_t limit = 1 << 20) {
  try {
    gunzip(bytes, "t.gz", limit);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("Gzip data inflates to what was deflated, members concatenated", "[io]") {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"ph\": \"X\", \"ts\": " + std::to_string(i) + "},\n";
  const std::string gz = gzip(text);
  CHECK(is_gzip(gz));
  CHECK_FALSE(is_gzip(text));
  CHECK(gz.size() < text.size() / 4);  // repetitive text compresses
  CHECK(gunzip(gz, "t.gz") == text);
  CHECK(gunzip(gz + gzip("tail"), "t.gz") == text + "tail");
  CHECK(gunzip(gzip(""), "t.gz").empty());
}

TEST_CASE("Damaged or oversized gzip data is one error naming the file", "[io]") {
  const std::string gz = gzip(std::string(100000, 'a').append("b"));
  CHECK(error_of(gz.substr(0, gz.size() / 2)) == "t.gz: damaged gzip data (truncated)");
  std::string flipped = gz;
  flipped[12] = static_cast<char>(flipped[12] ^ 0x55);
  CHECK(error_of(flipped).starts_with("t.gz: damaged gzip data"));
  CHECK(error_of(gz, 1000) == "t.gz: inflates to more than 1000 bytes");
  CHECK(error_of(std::string("\x1f\x8b", 2)) == "t.gz: damaged gzip data (truncated)");
}

TEST_CASE("A gzip-compressed profiler trace reads like the plain one", "[io][kineto]") {
  const std::string plain = TPSIM_SOURCE_DIR "/tests/calibration/data/kineto_small.json";
  std::ifstream in(plain, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto dir = std::filesystem::temp_directory_path() / (fmt::format("tpsim_gzip_{}", ::getpid()));
  std::filesystem::create_directories(dir);
  const std::string packed = (dir / "trace.pt.trace.json.gz").string();
  std::ofstream(packed, std::ios::binary) << gzip(text);
  const auto a = load_measurements_file(plain);
  const auto b = load_measurements_file(packed);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].name == b[i].name);
    CHECK(a[i].time_us == b[i].time_us);
  }
  std::filesystem::remove_all(dir);
}
