# stages/10a_kv_cache/faults.cmake — the planted faults of 10a_kv_cache: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the code this step adds to 06c's; 06c's faults stay 06c's.

flashsteps_fault(10a_kv_head_modulo STAGE 10a_kv_cache
  BREAKS "query head h reads K/V head h % H_kv instead of h / (H / H_kv): the groups interleave, so with H_kv < H most query heads read another group's K/V"
  FROM [=[  const std::int64_t kv_head = b * (sh.heads / sh.group) + (bh % sh.heads) / sh.group;]=]
  TO   [=[  const std::int64_t kv_head = b * (sh.heads / sh.group) + (bh % sh.heads) % (sh.heads / sh.group);]=]
  EXPECT "heads: FAIL" TESTS "GQA and MQA: groups of query heads share a K/V head*")

flashsteps_fault(10a_causal_aligned_to_skv STAGE 10a_kv_cache
  BREAKS "row g's bound (half of each warp's rows) is aligned to the cache's Skv, not to the sequence's length: a short sequence's rows see keys past its length (zero-filled in the ring), and their diagonal is in the wrong place"
  FROM [=[  const int kv_end[2] = {static_cast<int>(causal_kv_end(my_row[0], sh.sq, kv_len, kCausal)),]=]
  TO   [=[  const int kv_end[2] = {static_cast<int>(causal_kv_end(my_row[0], sh.sq, sh.skv, kCausal)),]=]
  EXPECT "heads: FAIL" TESTS "a KV cache of ragged lengths*")
