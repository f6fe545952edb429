// tests/gpu/stage_entry.hpp — how the GPU suite executable (fs_gpu_suite) takes the stage from a
// stage library it loads with dlopen: every stage's shared library holds flashsteps_new_stage()
// (stage_entry.cpp), and each test_<stage> binary (launcher.cpp) names its library in
// kStageLibraryVariable when it execs the suite (CONTRIBUTING.md, "One harness, shared").
#pragma once

namespace flashsteps {
class Stage;
}

/// make_stage() of the library that defines it, released: the caller owns the stage. A C name, so
/// that dlsym finds it by one spelling whatever the compiler mangles C++ names to.
extern "C" flashsteps::Stage* flashsteps_new_stage();

namespace flashsteps::test {
/// The environment variable that carries the stage library's path from test_<stage> to
/// fs_gpu_suite: no command-line flag, so nothing can collide with Catch2's.
inline constexpr const char* kStageLibraryVariable = "FLASHSTEPS_SUITE_STAGE_LIBRARY";
/// The suite executable's name, next to every test_<stage> (<build>/tests/, a bundle's bin/).
inline constexpr const char* kSuiteExecutable = "fs_gpu_suite";
}  // namespace flashsteps::test
