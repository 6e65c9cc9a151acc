#pragma once
// Shared by the libFuzzer targets: bad input must end in InputError (a clear
// message for the user); anything else escaping is a bug and crashes the target.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tpsim/io/input_error.hpp"

namespace tpsim::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

template <class F>
int expect_clean(F&& body) {
  try {
    body();
  } catch (const InputError&) {
    // rejected with a message: the expected outcome for bad input
  }
  return 0;
}

}  // namespace tpsim::fuzz
