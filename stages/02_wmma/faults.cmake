# stages/02_wmma/faults.cmake — the planted faults of 02_wmma: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(02_missing_barrier_staged_s STAGE 02_wmma
  BREAKS "no barrier between the warps' stores of the S tile and the copy-out that reads them"
  FROM [=[    __syncthreads();  // the whole S tile is staged: each thread copies out other warps' values]=]
  TO   [=[    // (planted fault: the barrier after staging S is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(02_kv_tiles_off_by_one STAGE 02_wmma
  BREAKS "the number of key tiles rounds down: the ragged last tile of S is never computed"
  FROM [=[tiles_kv = ceil_div(sh.skv, Tile::kBc);]=]
  TO   [=[tiles_kv = sh.skv / Tile::kBc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(02_missing_tail_zero_fill STAGE 02_wmma
  BREAKS "copy_tile leaves the vectors past the ragged edge unwritten instead of zero-filled"
  FROM [=[    *reinterpret_cast<uint4*>(dst + r * kLd + c) = val;]=]
  TO   [=[    if (r < rows && c < cols) *reinterpret_cast<uint4*>(dst + r * kLd + c) = val;]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "every head dimension*")

# Missing barriers between warps that run in step (caught since the scheduler lets each warp run
# ahead of the others: emu/src/scheduler.cpp, run_block)
flashsteps_fault(02_missing_barrier_before_staging STAGE 02_wmma
  BREAKS "no barrier before the S staging tile overwrites Q and K that other warps still read"
  FROM [=[    __syncthreads();  // every warp is done with Q and K: the staging tile overwrites them]=]
  TO   [=[    // (planted fault: the barrier before the staging tile overwrites Q and K is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
