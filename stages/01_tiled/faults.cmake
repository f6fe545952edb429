# stages/01_tiled/faults.cmake — the planted faults of 01_tiled: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(01_missing_barrier STAGE 01_tiled
  BREAKS "no barrier between staging a Q/K chunk and reading it: threads read rows not yet staged"
  FROM [=[      __syncthreads();  // the chunk is staged: every thread reads rows other threads loaded]=]
  TO   [=[      // (planted fault: the barrier after staging the chunk is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(01_kv_tiles_off_by_one STAGE 01_tiled
  BREAKS "the number of key tiles rounds down: the ragged last tile of S is never computed"
  FROM [=[tiles_kv = ceil_div(sh.skv, Tile::kBc);]=]
  TO   [=[tiles_kv = sh.skv / Tile::kBc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
