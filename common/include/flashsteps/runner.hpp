// flashsteps/runner.hpp — the command line every stage binary (stage00, stage01, ...) shares.
//
//   stageNN --batch 4 --heads 16 --seq 2048 [--seq-kv N] --dim 64 [--causal] [--dtype bf16]
//           [--iters N] [--seed S] [--emulate [--layout]]
//
// prints the GPU, the shape, the check against the CPU reference, the latency with the L2
// flushed, TFLOP/s and % of a tensor-core peak measured on this GPU, and each kernel's resources.
//
// --emulate runs the same check with the stage's own kernels on the CPU emulator (emu/): the
// runner execs its sibling stages/emulated/stageNN, the same runner sources built with
// FLASHSTEPS_EMULATED_BUILD against the emulator's CUDA runtime. That build times nothing (no
// latency, TFLOP/s, peak or resources) and says what the emulator proves and what it does not.
// --layout (with --emulate) prints, for each fragment layout the stage declares
// (Stage::fragment_layouts(): mma.m16n8k16, wgmma m64nNk16), which lane holds which fragment
// element, probed from the emulator's instruction models (emu/include/fsemu/layout.hpp).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>

#include "flashsteps/problem.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps {

/// Exit codes of every flashsteps binary.
enum Exit : int {
  kExitOk = 0,
  kExitCheckFailed = 1,  ///< the output failed the check, or a CUDA error
  kExitUsage = 2,        ///< bad flag or invalid problem
  kExitNoDevice = 3,     ///< no GPU, or this GPU or problem is outside what the stage supports
};

struct RunnerOptions {
  Problem problem;
  int iters = 20;
  int warmup = 3;
  std::uint64_t seed = 1;
  int device = 0;
  std::int64_t check_heads = 8;  ///< heads checked against the CPU reference (0: no check)
  bool measure_peak = true;
  bool emulate = false;  ///< --emulate: run on the CPU emulator (implied by the emulated build)
  bool layout = false;   ///< --layout: print fragment layouts (emulated build only)
};

/// Parses flags into `opts`. Returns nullopt to go on, or the exit code to return now
/// (kExitOk after --help, kExitUsage after a bad flag or an invalid problem, with a message).
std::optional<int> parse_runner_cli(int argc, const char* const* argv, std::string_view stage,
                                    std::string_view title, RunnerOptions* opts, std::ostream& out,
                                    std::ostream& err);

/// Whether this runner is the emulated build (stages/emulated/stageNN).
constexpr bool kEmulatedBuild =
#if defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD
    true;
#else
    false;
#endif

/// The whole runner: parse, check the device, run, check, time, report. In the GPU build,
/// `--emulate` anywhere in argv execs the emulated runner with the same arguments instead.
int runner_main(int argc, const char* const* argv, Stage& stage);

}  // namespace flashsteps
