# stages/06c_swizzle/faults.cmake — the planted faults of 06c_swizzle: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(06c_swapped_b_fragment STAGE 06c_swizzle
  BREAKS "the two B registers of S's even n8 tiles are swapped (k 0-7 and 8-15 exchanged)"
  FROM [=[        ptx::mma_m16n8k16<T>(s_acc[2 * np], q_frag[kk], {kb[0], kb[1]});]=]
  TO   [=[        ptx::mma_m16n8k16<T>(s_acc[2 * np], q_frag[kk], {kb[1], kb[0]});]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(06c_wrong_swizzle STAGE 06c_swizzle
  BREAKS "the swizzle XORs with r % 4, not r % 8: the copies and ldmatrix offsets disagree"
  FROM [=[  return r * kD + ((c ^ (r % 8)) * 8);]=]
  TO   [=[  return r * kD + ((c ^ (r % 4)) * 8);]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(06c_missing_barrier STAGE 06c_swizzle
  BREAKS "the tile's only block-wide barrier is gone: other threads' copies are not known to have landed. On hardware a silent race: a thread may read a chunk before the thread that copies it has waited for its copy, and gets what the stage held before (the last tile's keys, or nothing written yet), wrong only in some runs. The emulator fills shared memory with NaN before each block, so a read that comes first shows as NaN"
  FROM [=[    __syncthreads();
    prefetch(j + kStages - 1);]=]
  TO   [=[    // (planted fault: barrier (A) is gone)
    prefetch(j + kStages - 1);]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(06c_unmasked_tiles_off_by_one STAGE 06c_swizzle
  BREAKS "Tc_full rounds up: the diagonal tile takes the unmasked path"
  FROM [=[  const int Tc_full = kv_full / Bc;  // tiles 0 .. Tc_full-1 need no mask (<= Tc_i)]=]
  TO   [=[  const int Tc_full = (kv_full + Bc - 1) / Bc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
