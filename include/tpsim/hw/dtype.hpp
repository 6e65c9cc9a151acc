#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace tpsim {

enum class Dtype { bf16, fp16, fp32, fp8 };

inline int dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::fp32: return 4;
    case Dtype::fp8: return 1;
    default: return 2;
  }
}

inline std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp32: return "fp32";
    case Dtype::fp8: return "fp8";
  }
  return "?";
}

inline std::optional<Dtype> parse_dtype(std::string_view s) {
  if (s == "bf16") return Dtype::bf16;
  if (s == "fp16") return Dtype::fp16;
  if (s == "fp32") return Dtype::fp32;
  if (s == "fp8") return Dtype::fp8;
  return std::nullopt;
}

}  // namespace tpsim
