# stages/09b_bwd_fused/exercises.cmake — the exercise of 09b_bwd_fused that asks the reader to
# write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once. dK_j's and dV_j's sums are cut with dQ_i's share (two regions): dK_j's reads dS_ij
# the way dQ_i's must, transposed, and would be copied.

flashsteps_exercise(09b_write_products STAGE 09b_bwd_fused
  TASK "write the three products of tile (i, j) in fp32: in the first region, this thread's element (key c, column d) of dV_j += P_ijᵀ dO_i and dK_j += dS_ijᵀ Q_i (unscaled) into `dv_sum` and `dk_sum`, summed over the Br rows of Q_i (`sP`, `sdS`: (Br, Bc) fp32, `sQ`, `sdO`: (Br, D) dtype), and in the second, this block's share of dQ_i for the element (row r, column d) of this thread: scale · Σ_c dS_ij(r, c) K_j(c, d) over the Bc keys of its tile (`sdS`, (Br, Bc) fp32, and `sK`, (Bc, D) with rows `kLdKV` elements apart), added into the fp32 accumulator `dq_head` ((Sq, D) of this head, row row0 + r) while the blocks of the head's other K/V tiles add theirs to the same elements"
  SOLUTION [=[#pragma unroll 8
      for (int r = 0; r < Br; ++r) {
        dv_sum += sP[r * Bc + c] * to_f32(sdO[r * D + d]);
        dk_sum += sdS[r * Bc + c] * to_f32(sQ[r * D + d]);
      }
...
      float acc = 0.0f;
#pragma unroll 8
      for (int c = 0; c < Bc; ++c)
        acc += sdS[r * Bc + c] * to_f32(sK[c * kLdKV + d]);
      atomicAdd(&dq_head[(row0 + r) * D + d], acc * sh.scale);]=]
  STUB [=[      (void)c, (void)d;  // dV_j and dK_j get nothing from this tile: write their sums
...
      (void)d, (void)dq_head;  // dQ_i gets nothing from K_j: write this block's share]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* FAIL . dV max err [^|]* FAIL"
  TESTS "a non-default softmax scale"
  STUB_OPT -O1)  # its scalar loops run several times slower at the stubs' -O0
