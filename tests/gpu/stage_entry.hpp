// tests/gpu/stage_entry.hpp — how the GPU suite executable (fs_gpu_suite) takes the stage from a
// stage library it loads with dlopen: every stage's shared library holds flashsteps_new_stage()
// (stage_entry.cpp), and each test_<stage> binary (launcher.cpp) names its library in
// kStageLibraryVariable when it execs the suite (CONTRIBUTING.md, "One harness, shared").
#pragma once

#include <cstdio>
#include <string>

#include "flashsteps/stage.hpp"

/// make_stage() of the library that defines it, released: the caller owns the stage. A C name, so
/// that dlsym finds it by one spelling whatever the compiler mangles C++ names to.
extern "C" flashsteps::Stage* flashsteps_new_stage();

namespace flashsteps::test {
/// The environment variable that carries the stage library's path from test_<stage> to
/// fs_gpu_suite: no command-line flag, so nothing can collide with Catch2's.
inline constexpr const char* kStageLibraryVariable = "FLASHSTEPS_SUITE_STAGE_LIBRARY";
/// The suite executable's name, next to every test_<stage> (<build>/tests/, a bundle's bin/).
inline constexpr const char* kSuiteExecutable = "fs_gpu_suite";
/// flashsteps_new_stage's name, as fs_gpu_suite asks dlsym for it.
inline constexpr const char* kStageEntry = "flashsteps_new_stage";

/// Who a refusal names in both processes: argv[0]'s last component, the test_<stage> binary's
/// (the launcher keeps argv[0] when it execs the suite).
inline std::string program_name(int argc, char** argv) {
  const std::string path = argc > 0 && argv[0] ? argv[0] : "test_<stage>";
  return path.substr(path.rfind('/') + 1);
}

/// Prints `who`'s refusal ("<who>: cannot run: <reason>") on stderr; returns 1, the exit code of
/// a launcher or suite that cannot start.
inline int refuse(const std::string& who, const std::string& reason) {
  std::fprintf(stderr, "%s\n", refusal(who, reason).c_str());
  return 1;
}
}  // namespace flashsteps::test
