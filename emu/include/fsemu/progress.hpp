// fsemu/progress.hpp — a launch's progress, on a terminal only.
//
// A large grid takes the emulator minutes (each CUDA thread a fiber, each instruction modelled).
// run_grid (emu/src/scheduler.cpp) keeps one Progress per launch: once the launch has run for
// kQuietSeconds it rewrites one stderr line, at most every kEverySeconds,
//
//   fsemu: 120 of 600 blocks, 35.2 blocks/s, about 11 s left
//
// and ends it with the total when the launch ends. When stderr is not a terminal (a pipe, a log,
// CTest) it writes nothing, so logs and checked outputs do not change. FSEMU_PROGRESS_AFTER=<s>
// replaces the two quiet seconds (the CLI tests show a short launch's line with 0).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace fsemu {

class Progress {
 public:
  static constexpr double kQuietSeconds = 2.0;  ///< a launch shorter than this prints nothing
  static constexpr double kEverySeconds = 0.5;  ///< the line is rewritten at most this often

  /// Seconds since some fixed start (steady); tests pass their own.
  using Clock = std::function<double()>;

  /// Reports the launch of `total_blocks` blocks on stderr if stderr is a terminal, after
  /// kQuietSeconds or $FSEMU_PROGRESS_AFTER seconds.
  explicit Progress(std::uint64_t total_blocks);
  /// Reports on `out` when `enabled`, reading the time from `now` (for the tests).
  Progress(std::uint64_t total_blocks, std::FILE* out, bool enabled, Clock now);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// One more block ran to completion.
  void block_done();
  /// The launch is over: ends the line, if one was printed, so what follows starts on its own.
  void end();

 private:
  std::uint64_t total_, done_ = 0;
  std::FILE* out_;
  bool enabled_, printed_ = false;
  Clock now_;
  double quiet_ = kQuietSeconds, start_ = 0.0, last_ = 0.0;
};

/// The progress line: "fsemu: <done> of <total> blocks, <rate> blocks/s, about <n> s left".
std::string progress_line(std::uint64_t done, std::uint64_t total, double elapsed_seconds);

}  // namespace fsemu
