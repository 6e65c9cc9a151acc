#include "tpsim/io/json_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "tpsim/io/duplicate_keys.hpp"
#include "tpsim/io/gzip.hpp"

namespace tpsim {

std::optional<std::vector<int>> parse_extents(const std::string& text, std::size_t count, int max) {
  std::vector<int> extents;
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  while (extents.size() < count) {
    if (!extents.empty()) {
      if (at == end || *at != 'x') return std::nullopt;
      ++at;
    }
    int v = 0;
    const auto [next, error] = std::from_chars(at, end, v);
    if (error != std::errc{} || next == at || v < 1 || v > max) return std::nullopt;
    extents.push_back(v);
    at = next;
  }
  if (at != end) return std::nullopt;
  return extents;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& choices) {
  std::optional<std::string> best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 2) + 1;
  for (const auto& c : choices) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

void fail_at(const std::string& path, const std::string& problem) {
  throw InputError(fmt::format("{}: {}", path, problem));
}

Json parse_json_text(const std::string& text, const std::string& source) {
  try {
    return parse_rejecting_duplicate_keys<Json>(text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for numbers too big for a double
    std::string what = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at ..."; keep the useful tail.
    const auto pos = what.find("] ");
    throw InputError(fmt::format("{}: malformed JSON: {}", source, pos == std::string::npos ? what : what.substr(pos + 2)));
  } catch (const InputError& e) {  // a duplicate key, at its JSON path
    throw InputError(fmt::format("{}: {}", source, e.what()));
  }
}

namespace {

// Reads at most `limit` bytes; one more means the input is too large.
std::string read_capped(std::istream& in, const std::string& source, std::size_t limit) {
  std::string bytes;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    bytes.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > limit)
      throw InputError(fmt::format("{}: larger than {} bytes, more than any tpsim input needs", source, limit));
  }
  if (in.bad()) throw InputError(fmt::format("{}: read error", source));
  return bytes;
}

}  // namespace

std::string read_input_file(const std::string& file, std::size_t limit) {
  if (file == "-") return read_capped(std::cin, "standard input", limit);
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status)) throw InputError(fmt::format("{}: no such file", file));
  if (std::filesystem::is_directory(status)) throw InputError(fmt::format("{}: is a directory, not a file", file));
  if (!std::filesystem::is_regular_file(status))
    throw InputError(fmt::format("{}: not a regular file (a device, pipe or socket); give a file, or - for standard input", file));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file (permission?)", file));
  return read_capped(in, file, limit);
}

Json read_json_file(const std::string& file) {
  const std::string bytes = read_input_file(file);
  const std::string source = file == "-" ? "standard input" : file;
  return parse_json_text(is_gzip(bytes) ? gunzip(bytes, source, kMaxInputBytes) : bytes, source);
}

static std::string type_name(const Json& v) { return v.type_name(); }

ObjectReader::ObjectReader(const Json& j, std::string path, std::vector<std::string> allowed)
    : j_(&j), path_(std::move(path)), allowed_(std::move(allowed)) {
  if (!j.is_object()) fail_at(path_, fmt::format("must be an object, got {}", type_name(j)));
  for (const auto& [key, value] : j.items()) {
    if (std::find(allowed_.begin(), allowed_.end(), key) != allowed_.end()) continue;
    std::string msg = fmt::format("unknown key \"{}\"", key);
    if (auto s = closest_match(key, allowed_)) msg += fmt::format(" (did you mean \"{}\"?)", *s);
    else msg += fmt::format(" (allowed: {})", fmt::join(allowed_, ", "));
    fail_at(path_, msg);
  }
}

const Json& ObjectReader::at(const std::string& key) const {
  if (!j_->contains(key)) fail_at(path_, fmt::format("missing required key \"{}\"", key));
  return (*j_)[key];
}

std::int64_t as_positive_int(const Json& v, const std::string& path) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail_at(path, "integer too large");
    const auto x = v.get<std::int64_t>();
    if (x <= 0) fail_at(path, fmt::format("must be a positive integer, got {}", x));
    return x;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d > 0 && d < 9.2e18) return static_cast<std::int64_t>(d);
    fail_at(path, fmt::format("must be a positive integer, got {}", v.dump()));
  }
  fail_at(path, fmt::format("must be a positive integer, got {}", type_name(v)));
}

std::string as_string(const Json& v, const std::string& path) {
  if (!v.is_string()) fail_at(path, fmt::format("must be a string, got {}", type_name(v)));
  return v.get<std::string>();
}

double as_positive_number(const Json& v, const std::string& path) {
  if (!v.is_number()) fail_at(path, fmt::format("must be a positive number, got {}", type_name(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d <= 0) fail_at(path, fmt::format("must be a positive number, got {}", v.dump()));
  return d;
}

double ObjectReader::positive_number(const std::string& key) const { return as_positive_number(at(key), child_path(key)); }

std::int64_t ObjectReader::positive_int(const std::string& key) const {
  return as_positive_int(at(key), child_path(key));
}

std::int64_t ObjectReader::positive_int_or(const std::string& key, std::int64_t fallback) const {
  return has(key) ? positive_int(key) : fallback;
}

std::int64_t ObjectReader::non_negative_int(const std::string& key) const {
  const Json& v = at(key);
  if ((v.is_number_integer() || v.is_number_unsigned()) && v.get<std::int64_t>() == 0) return 0;
  if (v.is_number_float() && v.get<double>() == 0.0) return 0;
  if (v.is_number_integer() && v.get<std::int64_t>() < 0)
    fail_at(child_path(key), fmt::format("must be a non-negative integer, got {}", v.get<std::int64_t>()));
  return as_positive_int(v, child_path(key));
}

std::string ObjectReader::string(const std::string& key) const { return as_string(at(key), child_path(key)); }

std::optional<std::string> ObjectReader::optional_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

std::optional<bool> ObjectReader::optional_bool(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  if (!at(key).is_boolean()) fail_at(child_path(key), "must be true or false");
  return at(key).get<bool>();
}

ObjectReader ObjectReader::object(const std::string& key, std::vector<std::string> allowed) const {
  return ObjectReader(at(key), child_path(key), std::move(allowed));
}

const Json& ObjectReader::array(const std::string& key) const {
  const Json& v = at(key);
  if (!v.is_array()) fail_at(child_path(key), fmt::format("must be an array, got {}", type_name(v)));
  return v;
}

}  // namespace tpsim
