#pragma once
// Gzip-compressed input (PyTorch's profiler writes *.pt.trace.json.gz), inflated by zlib.
#include <cstddef>
#include <string>
#include <string_view>

namespace tpsim {

// Whether `bytes` starts with the gzip magic number.
bool is_gzip(std::string_view bytes);

// The inflated contents of a gzip stream (concatenated members too). Throws
// InputError naming `source` for a damaged stream or one that inflates past
// `limit` bytes (a guard against decompression bombs).
std::string gunzip(std::string_view bytes, const std::string& source, std::size_t limit = std::size_t{8} << 30);

}  // namespace tpsim
