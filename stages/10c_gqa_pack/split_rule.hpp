// stages/10b_split_kv/split_rule.hpp — how many splits of the keys stage 10b launches: the one
// rule, a host function of four integers, so that its CPU test (tests/cpu/test_split_rule.cpp)
// needs no GPU and no emulator. The launcher calls it (launcher.cu); FLASHSTEPS_KV_SPLITS forces
// a count instead.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace flashsteps::split_kv {

/// The most splits a launch takes: FlashAttention-2's cap (flash_api.cpp, set_params_splitkv).
inline constexpr int kMaxSplits = 128;

//! [split_rule]
/// The split count FlashAttention-2 picks by wave efficiency (csrc/flash_attn/flash_api.cpp,
/// num_splits_heuristic; restated here, not copied):
///   blocks     the grid without splits, B * H * ceil(Sq / Br);
///   slots      the blocks the GPU runs at once: SMs x blocks per SM (2 here, as FlashAttention-2
///              counts for its 128-thread blocks: multiProcessorCount * 2);
///   key_tiles  the key tiles of the cache, ceil(Skv / Bc).
/// A grid that fills 80% of the slots already takes 1. Otherwise s splits run blocks * s blocks,
/// n = blocks * s / slots waves, and the last wave is full to n / ceil(n), the efficiency of s.
/// The rule takes the smallest s whose efficiency is at least 85% of the best, among s from 1 to
/// min(max_splits, slots, key_tiles), where s counts only if it changes the tiles per split
/// (ceil(key_tiles / s) != ceil(key_tiles / (s - 1))): more splits that read as many tiles each
/// would leave the last ones empty. Few splits are preferred to many: every split writes a partial
/// O that the combine reads back. Anything not positive (no block, no known device, no key): 1.
inline int num_splits_rule(std::int64_t blocks, std::int64_t slots, std::int64_t key_tiles,
                           int max_splits = kMaxSplits) {
  if (blocks <= 0 || slots <= 0 || key_tiles <= 0 || max_splits <= 1) return 1;
  if (static_cast<double>(blocks) >= 0.8 * static_cast<double>(slots)) return 1;
  const auto most = static_cast<int>(std::min<std::int64_t>({max_splits, slots, key_tiles}));
  auto tiles_each = [&](int s) { return (key_tiles + s - 1) / s; };
  auto counts = [&](int s) { return s == 1 || tiles_each(s) != tiles_each(s - 1); };
  auto efficiency = [&](int s) {
    const double waves = static_cast<double>(blocks) * s / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int s = 1; s <= most; ++s)
    if (counts(s)) best = std::max(best, efficiency(s));
  for (int s = 1; s <= most; ++s)
    if (counts(s) && efficiency(s) >= 0.85 * best) return s;
  return 1;
}
//! [split_rule]

/// The key tiles each of `splits` splits reads: ceil(key_tiles / splits) (split s reads tiles
/// [s * that, (s + 1) * that), cut to the tiles its rows see). At least 1.
inline int tiles_per_split(std::int64_t key_tiles, int splits) {
  return static_cast<int>(std::max<std::int64_t>(1, (key_tiles + splits - 1) / splits));
}

}  // namespace flashsteps::split_kv
