#pragma once
// The suite builds with Catch2 v2 (Debian 12's catch2 package) and v3 (newer
// distributions); CMake says which one it found (TPSIM_CATCH_MAJOR). Tests include
// this header and use v2's names, which v3 spells differently.
#if TPSIM_CATCH_MAJOR >= 3
#include <string>

#include <catch2/catch_all.hpp>

namespace Catch {
namespace Matchers {
// v2's string Contains is v3's ContainsSubstring.
inline auto Contains(const std::string& text, CaseSensitive cs = CaseSensitive::Yes) { return ContainsSubstring(text, cs); }
// A literal would otherwise pick v3's element-of-a-range Contains template.
inline auto Contains(const char* text, CaseSensitive cs = CaseSensitive::Yes) { return ContainsSubstring(text, cs); }
}  // namespace Matchers
using Matchers::Contains;
}  // namespace Catch
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
