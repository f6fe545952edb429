# stages/03_online_softmax/faults.cmake — the planted faults of 03_online_softmax: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(03_tiles_off_by_one STAGE 03_online_softmax
  BREAKS "Tc_i rounds down: the ragged last key tile is skipped"
  FROM [=[  const int Tc_i = (kv_stop + Bc - 1) / Bc;]=]
  TO   [=[  const int Tc_i = kv_stop / Bc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_tail_zero_fill STAGE 03_online_softmax
  BREAKS "load_tile leaves rows past the last key unwritten instead of zero-filled"
  FROM [=[    *reinterpret_cast<uint4*>(dst + r * ld + c * Tile::kVec) = piece;]=]
  TO   [=[    if (row0 + r < n_rows) *reinterpret_cast<uint4*>(dst + r * ld + c * Tile::kVec) = piece;]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "ragged tails*")

flashsteps_fault(03_missing_barrier_q STAGE 03_online_softmax
  BREAKS "no barrier after loading Q_i and zeroing O_i: a block that sees no key reads O rows other warps zero"
  FROM [=[  __syncthreads();  // Q_i and the zeroed O_i are complete before any warp reads them]=]
  TO   [=[  // (planted fault: the barrier after loading Q_i and zeroing O_i is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "Sq != Skv both ways*")

# Missing barriers between warps that run in step (caught since the scheduler lets each warp run
# ahead of the others: emu/src/scheduler.cpp, run_block)
flashsteps_fault(03_missing_barrier_a STAGE 03_online_softmax
  BREAKS "no barrier (A): warps multiply with K_j rows other warps have not loaded yet"
  FROM [=[    __syncthreads();  // (A) K_j is complete before any warp multiplies with it]=]
  TO   [=[    // (planted fault: barrier (A) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_barrier_b STAGE 03_online_softmax
  BREAKS "no barrier (B): V_j overwrites the K_j buffer while other warps still multiply with it"
  FROM [=[    // warp stored is visible to all of its lanes (the softmax reads it in a different layout).
    __syncthreads();]=]
  TO   [=[    // warp stored is visible to all of its lanes (the softmax reads it in a different layout).
    // (planted fault: barrier (B) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_barrier_c STAGE 03_online_softmax
  BREAKS "no barrier (C): warps multiply P with V_j rows other warps have not loaded yet"
  FROM [=[    // the warp's fragment loads below.
    __syncthreads();]=]
  TO   [=[    // the warp's fragment loads below.
    // (planted fault: barrier (C) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_barrier_d STAGE 03_online_softmax
  BREAKS "no barrier (D): K_{j+1} overwrites V_j while other warps still multiply with it"
  FROM [=[    // tile, the O strips stored above are visible to the epilogue's lanes.
    __syncthreads();]=]
  TO   [=[    // tile, the O strips stored above are visible to the epilogue's lanes.
    // (planted fault: barrier (D) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
