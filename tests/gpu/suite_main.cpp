// tests/gpu/suite_main.cpp — what the GPU suite's main() runs on a stage: fs_gpu_suite's
// (suite_exe.cpp, on the stage library a test_<stage> binary names) in the GPU build, and each
// emulated suite's (main.cpp). Without a GPU, or on a GPU below the stage's minimum compute
// capability, it says why and exits 77, which ctest reports as skipped. In the GPU build it is
// linked once, into fs_gpu_suite, with the test cases and Catch2's session (CONTRIBUTING.md "One
// harness, shared"): a test_<stage> binary holds only the launcher's main().
#define FLASHSTEPS_CATCH_SESSION
#include "flashsteps_catch.hpp"

#include <iostream>
#include <utility>

#include "suite.hpp"

namespace flashsteps::test {
namespace {
std::unique_ptr<Stage> g_stage;
DeviceInfo g_device;
}  // namespace

Stage& stage() {
  return *g_stage;
}
const DeviceInfo& device() {
  return g_device;
}

}  // namespace flashsteps::test

int flashsteps::test::suite_main(int argc, char** argv, std::unique_ptr<Stage> stage) {
  using namespace flashsteps;
  constexpr int kSkipped = 77;
  test::g_stage = std::move(stage);
  const std::string who = std::string(test::g_stage->name()) + " GPU suite (skipped)";
  std::string why;
  const auto dev = query_device(0, &why);
  if (!dev) {
    std::cout << refusal(who, no_device_reason(*test::g_stage, why)) << '\n';
    return kSkipped;
  }
  if (Support s = supports_device(*test::g_stage, *dev); !s) {
    std::cout << refusal(who, s.reason) << '\n';
    return kSkipped;
  }
  test::g_device = *dev;
  test::g_stage->setup(*dev);
  std::cout << test::g_stage->name() << " on " << dev->summary() << '\n';
  return flashsteps::test::run_catch_session(argc, argv);
}
