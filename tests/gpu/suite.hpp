// tests/gpu/suite.hpp — what the shared GPU suite's main() sets up for the test cases.
#pragma once

#include <cstdint>
#include <memory>

#include "flashsteps/device_info.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps::test {

Stage& stage();
const DeviceInfo& device();

/// The suite on `stage`, with Catch2's command line (tests/gpu/suite_main.cpp): what main() of the
/// GPU build's fs_gpu_suite (tests/gpu/suite_exe.cpp) and of an emulated suite (main.cpp) returns.
int suite_main(int argc, char** argv, std::unique_ptr<Stage> stage);

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

/// The shape run twice by the determinism case: Sq x Skv, B = 2, H = kRepeatHeads. On a GPU 333 x
/// 517, B*H = 6; emulated 133 x 517, B*H = 2 (an eighth of the work: the emulator runs the blocks
/// in one seeded order, so what two runs there can differ in is state a run leaves behind, such as
/// a workspace not zeroed, which the small shape shows as well). Both are ragged for every tile
/// size here, with Sq < Skv; 517 keys are more key tiles than any stage's K/V ring has stages, so
/// the ring wraps (planted faults of 07a-08a rely on it), and 133 rows reach a second consumer.
#if defined(FLASHSTEPS_EMULATED_BUILD)
inline constexpr std::int64_t kRepeatSq = 133, kRepeatSkv = 517, kRepeatHeads = 1;
#else
inline constexpr std::int64_t kRepeatSq = 333, kRepeatSkv = 517, kRepeatHeads = 3;
#endif

/// The backward stages' long sums (the case "a backward stage sums its gradients in fp32"): dK and
/// dV add one term per query row, dQ one per key. A stage that kept a gradient's running sum in
/// the input dtype instead of fp32 rounds it once per query (or key) tile it adds; with tiles of
/// 32 or 64 rows, short sums stay inside the check's bound (twice the same-precision reference's
/// error plus one rounding at the gradient's size) and only a long one goes past it by a margin.
/// kAccumLong x kAccumShort and its transpose, one head, D = 64, bf16: a sum of 4096 terms
/// rounded every 32 to 64 of them is off by 2 to 3 times the bound in dozens of elements (the
/// commit that added the case shows 09b and 09c so changed failing it). kAccumShort is one key
/// tile of every backward stage. The same in every build: the emulator runs it in seconds.
inline constexpr std::int64_t kAccumLong = 4096, kAccumShort = 64;

}  // namespace flashsteps::test
