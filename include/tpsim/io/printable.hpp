#pragma once
// User text (scenario names, unknown keys, sweep values) reaches terminals, CSV rows
// and Markdown tables: control bytes are written as \xNN so an ESC cannot drive the
// terminal and a newline cannot split a row.
#include <string>
#include <string_view>

namespace tpsim {

inline std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tpsim
