# stages/06b_registers/exercises.cmake — the exercise of 06b_registers that asks the reader to
# write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once.

flashsteps_exercise(06b_write_p_fragment STAGE 06b_registers
  TASK "write `p_frag`, the A fragment of P_ij for keys 16kk..16kk+15, from the S accumulators `s_acc[2 * kk]` and `s_acc[2 * kk + 1]` of this lane, with `pack2<T>(lo, hi)` (the picture above the region: a0..a3 are rows g, g+8 at columns 2t, 2t+1 and 8+2t, 9+2t)"
  SOLUTION [=[      const std::uint32_t p_frag[4] = {// (16, 16) dtype of P_ij: keys 16kk..16kk+15, the A fragment
                                       pack2<T>(s_acc[2 * kk][0], s_acc[2 * kk][1]),
                                       pack2<T>(s_acc[2 * kk][2], s_acc[2 * kk][3]),
                                       pack2<T>(s_acc[2 * kk + 1][0], s_acc[2 * kk + 1][1]),
                                       pack2<T>(s_acc[2 * kk + 1][2], s_acc[2 * kk + 1][3])};]=]
  STUB [=[      const std::uint32_t p_frag[4] = {0u, 0u, 0u, 0u};  // P = 0: write the four registers]=]
  EXPECT "LSE right, only O wrong" TESTS "a non-default softmax scale")
