// tests/gpu/suite.hpp — what the shared GPU suite's main() sets up for the test cases.
#pragma once

#include "flashsteps/device_info.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps::test {

Stage& stage();
const DeviceInfo& device();

}  // namespace flashsteps::test
