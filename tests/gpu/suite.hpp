// tests/gpu/suite.hpp — what the shared GPU suite's main() sets up for the test cases.
#pragma once

#include <cstdint>

#include "flashsteps/device_info.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps::test {

Stage& stage();
const DeviceInfo& device();

/// The longest sequence the suite runs. On the CPU emulator (test_emu_<stage>, built with
/// FLASHSTEPS_EMULATED_BUILD) it is 300 instead of 1000: still ragged for every tile size here
/// (300 = 2*128 + 44 = 4*64 + 44) and longer than several key tiles, at a tenth of the work of
/// the unfused stages' Sq x Skv score matrices, which keeps the emulated suites inside CI's time.
/// One query against 1000 keys stays in every build: cheap, and it wraps every stage's K/V ring.
#if defined(FLASHSTEPS_EMULATED_BUILD)
inline constexpr std::int64_t kLongSeq = 300;
#else
inline constexpr std::int64_t kLongSeq = 1000;
#endif

/// Sq = Skv of the grid that fills the GPU (B*H at least twice the SM count). The emulated device
/// has 8 SMs, so B*H = 16 there, two blocks per SM or more whatever the query tile; 128 rows
/// instead of 256 is a quarter of the work of the unfused stages' Sq x Skv score matrices.
#if defined(FLASHSTEPS_EMULATED_BUILD)
inline constexpr std::int64_t kGridSeq = 128;
#else
inline constexpr std::int64_t kGridSeq = 256;
#endif

}  // namespace flashsteps::test
