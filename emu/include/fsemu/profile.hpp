// emu/include/fsemu/profile.hpp — what the emulator counts per kernel launch, for
// `--emulate --profile` (the runner) and the comparison with Nsight Compute (emu/README.md,
// "Counting").
//
// Counting is off unless enable() was called. While on, every launch records per class of
// instruction the warp-level instructions executed, the shared-memory wavefronts and bank
// conflicts of each warp-wide shared access (32 banks of 4 bytes), and the 32-byte global sectors
// each warp-wide global access requests. A launch may run only a sample of its blocks
// (Options::sample_blocks): the counts are then scaled by blocks / sampled, and say so.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace fsemu::profile {

struct Options {
  /// Run at most this many of a launch's blocks, evenly spaced in linear block order, and scale
  /// the counts by blocks / sampled; 0 runs every block.
  std::uint64_t sample_blocks = 0;
};
void enable(const Options& options);
bool enabled();

/// One counted quantity of a launch: a name of the emulator's ("shared.ld.wavefronts"), the
/// Nsight Compute metric it corresponds to where one does (empty otherwise), its value after
/// scaling, and a one-line meaning.
struct Count {
  std::string name;
  std::string ncu_metric;
  double value;
  std::string meaning;
};
struct Launch {
  std::string kernel;  // demangled, as the host compiler names it
  unsigned grid[3], block[3];
  std::uint64_t dynamic_smem;
  std::uint64_t blocks, blocks_run;  // scale = blocks / blocks_run
  double wall_seconds;
  std::vector<Count> counts;
};
/// Every launch since enable(), in launch order.
const std::vector<Launch>& launches();

/// The counts as a table, one block per launch.
void print(std::ostream& out);
/// The counts in the CSV layout of `ncu --csv --page details --print-units base` (what
/// bench/profile.sh commits), one row per launch and Nsight Compute metric that corresponds;
/// marked emulated: Host Name "fsemu", Section Name "fsemu emulated counts".
void write_ncu_csv(std::ostream& out, const std::string& process_name);

}  // namespace fsemu::profile
