# stages/06b_registers/faults.cmake — the planted faults of 06b_registers: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(06b_p_fragment_rows STAGE 06b_registers
  BREAKS "P's A operand a1 takes row g's keys 8+2t.. in place of row g+8's keys 2t..: the accumulator is repacked wrong"
  FROM [=[          pack2<T>(s_acc[2 * kk][2], s_acc[2 * kk][3]),]=]
  TO   [=[          pack2<T>(s_acc[2 * kk + 1][0], s_acc[2 * kk + 1][1]),]=]
  EXPECT "LSE right, only O wrong" TESTS "a non-default softmax scale")

flashsteps_fault(06b_quad_max_half_reduced STAGE 06b_registers
  BREAKS "a row's max is reduced over 2 of the 4 lanes of its quad: the lanes disagree on m"
  FROM [=[      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));  // after two steps all 4 agree]=]
  TO   [=[      // (planted fault: the second step of the quad's max reduction is gone)]=]
  EXPECT "[1-9][0-9]* rows of LSE wrong" TESTS "a non-default softmax scale")

flashsteps_fault(06b_mask_off_by_one STAGE 06b_registers
  BREAKS "the mask on the accumulator keeps column kv_end, the first key a row must not see (past its diagonal, or K's zero-filled row past Skv)"
  FROM [=[        if (kv0 + 8 * n + 2 * tg + (e % 2) >= kv_end[e / 2]) s_acc[n][e] = -INFINITY;]=]
  TO   [=[        if (kv0 + 8 * n + 2 * tg + (e % 2) > kv_end[e / 2]) s_acc[n][e] = -INFINITY;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
