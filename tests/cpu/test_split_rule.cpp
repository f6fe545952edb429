// The split-KV stages' split rule (split_rule.hpp) on the CPU, compiled once for every stage folder
// that holds a copy of it (tests/CMakeLists.txt, flashsteps_stage_file_test: the build passes the
// copy as FLASHSTEPS_STAGE_FILE). Every expected count is worked out by hand in the comment beside
// it from the rule's definition (FlashAttention-2's wave efficiency): s splits run blocks * s
// blocks, n = blocks * s / slots waves, efficiency n / ceil(n); the smallest s whose efficiency is
// at least 85% of the best counted s wins, where s counts when ceil(key_tiles / s) differs from
// ceil(key_tiles / (s - 1)) and s <= min(128, slots, key_tiles); 1 when blocks >= 0.8 * slots.
// (That the kernels give the right O for every count is the emulated suite's: emu.10b_split_kv*.)
#include "flashsteps_catch.hpp"

#include <cstdint>

#ifndef FLASHSTEPS_STAGE_FILE
#error "FLASHSTEPS_STAGE_FILE names the stage's split_rule.hpp (tests/CMakeLists.txt)"
#endif
#include FLASHSTEPS_STAGE_FILE

using flashsteps::split_kv::kMaxSplits;
using flashsteps::split_kv::num_splits_rule;
using flashsteps::split_kv::tiles_per_split;

TEST_CASE("split rule: decode at B = 1 on an H100 takes many splits") {
  // B = 1, H = 32, Sq = 1 (one query block of 64 rows): 32 blocks. H100: 132 SMs x 2 blocks per SM
  // = 264 slots. 32k keys in tiles of 64 (D = 128): 512 key tiles. 32 < 0.8 * 264 = 211.2: split.
  // s <= 8 is one wave, efficiency 32 s / 264: s = 6 gives 0.727, s = 7 gives 0.8485. The best is
  // below 0.99822 (= 0.8485 / 0.85), so s = 7 is within 85% of it: a whole number of waves needs
  // 32 s a multiple of 264, s = 33, 66 or 99, and none counts (ceil(512 / s) = 16, 8, 6, as for
  // s - 1); any other s <= 128 has k = ceil(4 s / 33) <= 16 waves and 33 k - 4 s >= 1, so
  // efficiency 4 s / (33 k) <= 1 - 1 / (33 * 16) = 0.99811. And s = 6 is below 0.85 * 0.9966,
  // the efficiency of s = 74 (which counts: ceil(512 / 74) = 7, ceil(512 / 73) = 8).
  CHECK(num_splits_rule(32, 264, 512) == 7);
  // 8 blocks (H = 8, MQA): s <= 33 is one wave, efficiency 8 s / 264. s = 64 counts (ceil(512 /
  // 64) = 8, ceil(512 / 63) = 9) and runs 512 blocks, 1.94 waves: 0.9697. So 85% of the best is
  // between 0.824 and 0.85: s = 27 (0.818) is below it, 28 does not count (ceil(512 / 28) = 19 =
  // ceil(512 / 27)), 29 (232 blocks, 0.879) is above it: 29.
  CHECK(num_splits_rule(8, 264, 512) == 29);
}

TEST_CASE("split rule: a grid that fills 80% of the slots takes one split") {
  // B = 64, H = 32: 2,048 blocks on 264 slots.
  CHECK(num_splits_rule(2048, 264, 128) == 1);
  // The boundary, 0.8 * 264 = 211.2: 212 blocks take 1 split.
  CHECK(num_splits_rule(212, 264, 100) == 1);
  // 211 blocks look for splits: s = 1 to 4 have efficiency 211 / 264 = 0.799 (211 s blocks are
  // more than s - 1 waves: 844 > 792 at s = 4); s = 5: 1,055 blocks = 3.996 waves, 0.9991, which
  // counts (ceil(100 / 5) = 20, ceil(100 / 4) = 25): the best is at least 0.9991, 85% of it is
  // above 0.849 > 0.799, so 5.
  CHECK(num_splits_rule(211, 264, 100) == 5);
}

TEST_CASE("split rule: FlashAttention's own example, 48 blocks on 108 slots") {
  // s = 1: 48 / 108 = 0.444; s = 2: 96 / 108 = 0.889; the best is at most 1, so 85% of it is at
  // most 0.85 <= 0.889, and at least 0.85 x 0.889 = 0.756 > 0.444: 2 (3 would be 144 blocks, 1.33
  // waves, 0.667).
  CHECK(num_splits_rule(48, 108, 256) == 2);
}

TEST_CASE("split rule: never more splits than key tiles, nor than the cap") {
  // One block, 264 slots, 3 key tiles: at most 3 splits, efficiency s / 264, best at 3 (it counts:
  // ceil(3 / 3) = 1, ceil(3 / 2) = 2), 85% of it is 2.55 / 264 > 2 / 264: 3.
  CHECK(num_splits_rule(1, 264, 3) == 3);
  CHECK(num_splits_rule(1, 264, 1) == 1);
  // One block on 1,000 slots with 1,000 key tiles: at most 128 splits (the cap). Efficiency s /
  // 1000; 126, 127 and 128 do not count (ceil(1000 / s) = 8, as for 125), so the best is 125
  // (0.125) and 85% of it is 0.10625: the smallest counted s >= 106.25 is 112 (107 to 111 read
  // ceil(1000 / s) = 10 tiles, as 106 does; 112 reads 9).
  CHECK(num_splits_rule(1, 1000, 1000) == 112);
  CHECK(num_splits_rule(1, 1000, 1000, 100) <= 100);
  // Whatever the grid, the count is between 1 and the key tiles (and the cap).
  for (std::int64_t tiles = 1; tiles <= 40; ++tiles)
    for (std::int64_t blocks = 1; blocks <= 24; ++blocks) {
      const int s = num_splits_rule(blocks, 264, tiles);
      INFO("blocks " << blocks << ", key tiles " << tiles << ": " << s << " splits");
      CHECK(s >= 1);
      CHECK(s <= tiles);
      CHECK(s <= kMaxSplits);
    }
}

TEST_CASE("split rule: a split count that reads as many tiles as one fewer does not count") {
  // One block on 100 slots, 64 key tiles: efficiency s / 100, best at 64 (0.64; it counts, 1 tile
  // against 2 at 63), 85% of it is 0.544: s >= 55, but 55 to 63 read 2 tiles each, as 54 does,
  // and only 64 counts: 64, not 55.
  CHECK(num_splits_rule(1, 100, 64) == 64);
}

TEST_CASE("split rule: nothing to split gives one split") {
  CHECK(num_splits_rule(0, 264, 512) == 1);   // no block
  CHECK(num_splits_rule(32, 0, 512) == 1);    // no known device (before setup())
  CHECK(num_splits_rule(32, 264, 0) == 1);    // no key tile
  CHECK(num_splits_rule(-1, 264, 512) == 1);  // nonsense stays harmless
  CHECK(num_splits_rule(32, 264, 512, 1) == 1);
  CHECK(num_splits_rule(32, 264, 512, 0) == 1);
}

TEST_CASE("split rule: the tiles of each split cover the cache once") {
  CHECK(tiles_per_split(512, 7) == 74);  // 7 x 74 = 518 >= 512; 6 x 74 = 444 < 512
  CHECK(tiles_per_split(512, 1) == 512);
  CHECK(tiles_per_split(3, 7) == 1);  // more splits than tiles: the last 4 are empty
  CHECK(tiles_per_split(0, 1) == 1);
  // Split s reads [s * t, (s + 1) * t): the splits cover tiles [0, key_tiles), and t is the
  // fewest tiles each that does (one fewer leaves tiles uncovered).
  for (std::int64_t tiles = 1; tiles <= 64; ++tiles)
    for (int splits = 1; splits <= 9; ++splits) {
      const std::int64_t t = tiles_per_split(tiles, splits);
      CHECK(t * splits >= tiles);
      CHECK((t - 1) * splits < tiles);
    }
}
