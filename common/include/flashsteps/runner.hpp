// flashsteps/runner.hpp — the command line every stage binary (stage00, stage01, ...) shares.
//
//   stageNN --batch 4 --heads 16 --seq 2048 [--seq-kv N] --dim 64 [--causal] [--dtype bf16]
//           [--heads-kv N] [--cache-lens L0,L1,... | seeded:N] [--page-size P]
//           [--iters N] [--seed S] [--emulate [--layout | --profile [--profile-csv F]
//           [--profile-blocks N]]]
//
// prints the GPU, the shape, the check against the CPU reference, the latency with the L2
// flushed, TFLOP/s and % of a tensor-core peak measured on this GPU, and each kernel's resources.
// A backward stage (Stage::kind()) is run on O and LSE from the reference forward and a random
// dO, and its dQ, dK and dV are checked against reference_attention_backward(); its TFLOP/s count
// the backward's FLOPs (Problem::flops(StageKind::backward)).
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
#include <string>

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

/// The shape a runner runs with no shape flags, named in --help: several heads, and lengths that
/// are no multiple of any stage's tile (64 or 128 rows), so every stage's ragged last tiles of Q
/// and of K, V are checked, not a one-token problem that passes by accident.
Problem runner_default_problem();

struct RunnerOptions {
  Problem problem = runner_default_problem();
  int iters = 20;
  int warmup = 3;
  std::uint64_t seed = 1;
  int device = 0;
  std::int64_t check_heads = 8;  ///< heads checked against the CPU reference (0: no check)
  bool measure_peak = true;
  bool deterministic = false;  ///< --deterministic: ask a stage's deterministic mode (backward)
  bool emulate = false;  ///< --emulate: run on the CPU emulator (implied by the emulated build)
  bool layout = false;   ///< --layout: print fragment layouts (emulated build only)
  /// --profile (with --emulate): count instructions, shared wavefronts and global sectors per
  /// kernel (emu/include/fsemu/profile.hpp); --profile-csv writes them as Nsight Compute's CSV;
  /// --profile-blocks N emulates N evenly spaced blocks of each launch and scales.
  bool profile = false;
  std::string profile_csv;
  std::uint64_t profile_blocks = 0;
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

#if defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD
/// What --layout prints: for a stage whose Stage::fragment_layouts() names any (06a-06c, the 07
/// stages), those layouts probed from the emulator's instruction models; for the other stages,
/// why layouts are not their lesson.
/// Emulated build only (the Python package's flashsteps.layout() prints the same).
int print_layout(const Stage& stage, std::ostream& out);
#endif

/// The whole runner: parse, check the device, run, check, time, report. In the GPU build,
/// `--emulate` anywhere in argv execs the emulated runner with the same arguments instead.
int runner_main(int argc, const char* const* argv, Stage& stage);

}  // namespace flashsteps
