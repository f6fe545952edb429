# stages/10a_kv_cache/exercises.cmake — the exercise of 10a_kv_cache that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once: a block's sequence, its K/V head and the keys its sequence holds.

flashsteps_exercise(10a_write_kv_head STAGE 10a_kv_cache
  TASK "write two of the three lines that find what a block reads (the first, `b`, the sequence of block row `bh` = b * H + h with H = `sh.heads`, is given): `kv_head`, the flat index b * H_kv + (the K/V head of query head h), where `sh.group` = H / H_kv query heads share one K/V head, and `kv_len`, the keys sequence b holds: `cache_seqlens[b]`, or `sh.skv` when `cache_seqlens` is null"
  SOLUTION [=[  const std::int64_t b = bh / sh.heads;
  const std::int64_t kv_head = b * (sh.heads / sh.group) + (bh % sh.heads) / sh.group;
  const int kv_len = cache_seqlens != nullptr ? cache_seqlens[b] : sh.skv;]=]
  STUB [=[  const std::int64_t b = bh / sh.heads;  // given
  const std::int64_t kv_head = b * (sh.heads / sh.group);  // every query head reads K/V head 0
  const int kv_len = sh.skv;  // every sequence holds the whole cache: write the length]=]
  EXPECT "heads: FAIL" TESTS "GQA and MQA: groups of query heads share a K/V head*")
