#include "tpsim/io/gzip.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <zlib.h>

#include "tpsim/io/input_error.hpp"

namespace tpsim {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view bytes, const std::string& source, std::size_t limit) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw InputError(fmt::format("{}: cannot start gzip decompression", source));
  const auto fail = [&](const std::string& why) {
    inflateEnd(&z);
    throw InputError(fmt::format("{}: {}", source, why));
  };
  std::string out;
  char chunk[1 << 16];
  std::size_t fed = 0;  // bytes handed to zlib so far (it takes at most 4 GiB at a time)
  while (true) {
    if (z.avail_in == 0 && fed < bytes.size()) {
      const std::size_t n = std::min<std::size_t>(bytes.size() - fed, std::size_t{1} << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + fed));
      z.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    const int rc = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - z.avail_out);
    if (out.size() > limit) fail(fmt::format("inflates to more than {} bytes", limit));
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated .gz files are one stream); anything else is ignored, as gzip does.
      const std::size_t next = fed - z.avail_in;
      if (!is_gzip(bytes.substr(next))) break;
      inflateReset(&z);
      continue;
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed >= bytes.size()) fail("damaged gzip data (truncated)");
    if (rc != Z_OK && rc != Z_BUF_ERROR) fail(fmt::format("damaged gzip data ({})", z.msg ? z.msg : "zlib error"));
    if (rc == Z_BUF_ERROR && z.avail_in > 0) fail("damaged gzip data");
  }
  inflateEnd(&z);
  return out;
}

}  // namespace tpsim
