// tests/gpu/main.cpp — main() of every test_<stage> binary. Without a GPU, or on a GPU below the
// stage's minimum compute capability, it says why and exits 77, which ctest reports as skipped.
#define FLASHSTEPS_CATCH_SESSION
#include "flashsteps_catch.hpp"

#include <iostream>

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

int main(int argc, char** argv) {
  using namespace flashsteps;
  constexpr int kSkipped = 77;
  test::g_stage = make_stage();
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
