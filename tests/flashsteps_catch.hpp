// tests/flashsteps_catch.hpp — the one Catch2 header every test file includes, for Catch2 2
// (Debian 12) and Catch2 3 (Debian 13, Ubuntu 24.04) alike. The top CMakeLists.txt finds Catch2
// and passes its major version as FLASHSTEPS_CATCH2_MAJOR (through the flashsteps::catch2 target).
//
// Tests are written in Catch2 3's names: Catch::Approx, Catch::Matchers::ContainsSubstring and
// Catch::Matchers::StartsWith; with Catch2 2 this header supplies the first two (Catch2 2 calls
// them Catch::Detail::Approx and Catch::Matchers::Contains).
//
// A file that defines main() defines FLASHSTEPS_CATCH_SESSION before including this header and
// calls flashsteps::test::run_catch_session(argc, argv), which is Catch::Session().run(argc, argv);
// every test binary links Catch2 without Catch2's main.
#pragma once

#ifndef FLASHSTEPS_CATCH2_MAJOR
#error "FLASHSTEPS_CATCH2_MAJOR is not set: link the test against flashsteps::catch2"
#endif

#if FLASHSTEPS_CATCH2_MAJOR >= 3

#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#ifdef FLASHSTEPS_CATCH_SESSION
#include <catch2/catch_session.hpp>
#endif

#else  // Catch2 2: one header

// Its runner, the whole implementation and the slowest file of a test binary to compile, is
// compiled once (tests/catch2_session.cpp, which flashsteps::catch2 links into every test
// binary), not once per main().

#ifdef FLASHSTEPS_CATCH_SESSION_IMPL
#define CATCH_CONFIG_RUNNER
#endif
#include <catch2/catch.hpp>

#include <string>

namespace Catch {
using Detail::Approx;
namespace Matchers {
inline StdString::ContainsMatcher ContainsSubstring(
    const std::string& str, CaseSensitive::Choice case_sensitivity = CaseSensitive::Yes) {
  return Contains(str, case_sensitivity);
}
}  // namespace Matchers
}  // namespace Catch

#endif

#ifdef FLASHSTEPS_CATCH_SESSION
namespace flashsteps::test {
#if FLASHSTEPS_CATCH2_MAJOR >= 3
inline int run_catch_session(int argc, char** argv) {
  return Catch::Session().run(argc, argv);
}
#else
int run_catch_session(int argc, char** argv);  // tests/catch2_session.cpp
#endif
}  // namespace flashsteps::test
#endif
