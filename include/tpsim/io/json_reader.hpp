#pragma once
// Strict reading of one JSON object: the keys it may hold are declared up front,
// so a misspelled key is an error (with a did-you-mean), never silently ignored.
// Every error names the JSON path, e.g. "$.workload.m: must be a positive integer".
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpsim/io/input_error.hpp"

namespace tpsim {

using Json = nlohmann::json;

// Levenshtein distance; the suggestion for a misspelled key is the closest allowed one.
std::size_t edit_distance(const std::string& a, const std::string& b);
std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& choices);

[[noreturn]] void fail_at(const std::string& path, const std::string& problem);

// Extents written as "128x256x64": exactly `count` whole numbers joined by 'x', each 1 to
// `max`; nullopt for anything else (the caller names the path and the form it wants).
std::optional<std::vector<int>> parse_extents(const std::string& text, std::size_t count, int max);

// The most any input file may hold (and a gzip file inflate to): a bound before
// allocating, far above any real scenario, measurement file or profiler trace.
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

// Parses text as JSON; a syntax error becomes "<source>: malformed JSON at byte N: ...",
// a repeated key "<source>: $.path: duplicate key ...".
Json parse_json_text(const std::string& text, const std::string& source);
// A regular file (or "-": standard input) read whole, at most kMaxInputBytes; a
// directory, device or pipe is refused with one line.
std::string read_input_file(const std::string& file, std::size_t limit = kMaxInputBytes);
Json read_json_file(const std::string& file);

class ObjectReader {
 public:
  ObjectReader(const Json& j, std::string path, std::vector<std::string> allowed_keys);

  const std::string& path() const { return path_; }
  std::string child_path(const std::string& key) const { return path_ + "." + key; }
  bool has(const std::string& key) const { return j_->contains(key); }
  const Json& at(const std::string& key) const;  // required

  std::int64_t positive_int(const std::string& key) const;
  std::int64_t positive_int_or(const std::string& key, std::int64_t fallback) const;
  std::int64_t non_negative_int(const std::string& key) const;  // 0 allowed
  double positive_number(const std::string& key) const;  // finite and > 0
  std::string string(const std::string& key) const;
  std::optional<std::string> optional_string(const std::string& key) const;
  std::optional<bool> optional_bool(const std::string& key) const;
  ObjectReader object(const std::string& key, std::vector<std::string> allowed) const;
  const Json& array(const std::string& key) const;

 private:
  const Json* j_;
  std::string path_;
  std::vector<std::string> allowed_;
};

std::int64_t as_positive_int(const Json& v, const std::string& path);
std::string as_string(const Json& v, const std::string& path);
double as_positive_number(const Json& v, const std::string& path);

}  // namespace tpsim
