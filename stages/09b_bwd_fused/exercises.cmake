# stages/09b_bwd_fused/exercises.cmake — the exercise of 09b_bwd_fused that asks the reader to
# write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once.

flashsteps_exercise(09b_write_dq_share STAGE 09b_bwd_fused
  TASK "write this block's share of dQ_i for the element (row r, column d) of this thread: scale · Σ_c dS_ij(r, c) K_j(c, d) over the Bc keys of its tile (`sdS`, (Br, Bc) fp32, and `sK`, (Bc, D) with rows `kLdKV` elements apart), added into the fp32 accumulator `dq_head` ((Sq, D) of this head, row row0 + r) while the blocks of the head's other K/V tiles add theirs to the same elements"
  SOLUTION [=[      float acc = 0.0f;
#pragma unroll 8
      for (int c = 0; c < Bc; ++c)
        acc += sdS[r * Bc + c] * to_f32(sK[c * kLdKV + d]);
      atomicAdd(&dq_head[(row0 + r) * D + d], acc * sh.scale);]=]
  STUB [=[      (void)d, (void)dq_head;  // dQ_i gets nothing from K_j: write this block's share]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* ok . dV max err [^|]* ok . on .* heads: FAIL"
  TESTS "a non-default softmax scale")
