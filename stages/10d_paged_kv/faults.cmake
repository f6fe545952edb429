# stages/10d_paged_kv/faults.cmake — the planted faults of 10d_paged_kv: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of what this step reads through pages; 10b's faults stay 10b's. The suite's
# paged case runs pages of 16, 64 and 256 keys (shorter than a key tile and spanning two or four),
# ragged lengths 0, 65, 300 and 150, groups of 2.

flashsteps_fault(10d_page_index_off_by_one STAGE 10d_paged_kv
  BREAKS "a thread's first key j is placed in page (j - 1) / page_size: when it is a page's first key, its page index is one too small and the walk reads the page before it in the table"
  FROM [=[  int page = (row0 + r0) / pages.size;]=]
  TO   [=[  int page = (row0 + r0 - 1) / pages.size;]=]
  EXPECT "heads: FAIL" TESTS "a paged KV cache*")

# Issue 41 names this one for the paged step: with a block table, a sequence's length says which of
# its pages hold keys. The line is 10a's, read here for the table's row of the same sequence.
flashsteps_fault(10d_length_of_next_sequence STAGE 10d_paged_kv
  BREAKS "sequence b reads the length of sequence b + 1 (the last one the first's): its rows see keys past its own length, from pages that hold none of its keys, or miss keys it holds"
  FROM [=[  const int kv_len = cache_seqlens != nullptr ? cache_seqlens[b] : sh.skv;]=]
  TO   [=[  const int kv_len = cache_seqlens != nullptr ? cache_seqlens[(b + 1) % (sh.bh / sh.heads)] : sh.skv;]=]
  EXPECT "heads: FAIL|NaN" TESTS "a paged KV cache*")

flashsteps_fault(10d_page_of_one_head STAGE 10d_paged_kv
  BREAKS "the pages are taken one K/V head long (page_size * D elements) instead of H_kv heads: page p is read at the place of page p / H_kv's head p % H_kv, another page's keys"
  FROM [=[                    std::int64_t{kv_heads} * sh.page_size * D, sh.page_size};]=]
  TO   [=[                    std::int64_t{1} * sh.page_size * D, sh.page_size};]=]
  EXPECT "heads: FAIL" TESTS "a paged KV cache*")
