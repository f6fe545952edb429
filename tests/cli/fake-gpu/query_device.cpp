// tests/cli/fake-gpu/query_device.cpp — a stand-in for flashsteps::query_device() that answers an
// sm_90 device, preloaded (LD_PRELOAD) into a test_<stage> of a bundle by tests/bundle-check.sh:
// the suite then lists its test cases without a GPU, which shows that they register in
// bin/fs_gpu_suite, which the binary execs, preload kept (CONTRIBUTING.md, "One harness, shared").
#include "flashsteps/device_info.hpp"
namespace flashsteps {
std::optional<DeviceInfo> query_device(int, std::string*) {
  DeviceInfo d;
  d.name = "stand-in";
  d.sm_count = 132;
  d.cc_major = 9;
  d.cc_minor = 0;
  return d;
}
}  // namespace flashsteps
