# stages/06a_mma_sync/exercises.cmake — the exercise of 06a_mma_sync that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.
# Part II's larger exercise: all four lane offsets (with K's left in place, V's would be a copy of
# it with the matrix order changed).

flashsteps_exercise(06a_write_lane_offsets STAGE 06a_mma_sync
  TASK "write this lane's four ldmatrix.x4 offsets, from the matrix order of each operand in the comment above the region (lane 8m + i addresses row i of matrix m): `q_lane` and `p_lane`, the shared-memory addresses (`ptx::smem_addr`) in this warp's strip, from row `warp_row0`, of Q (`sQ`, rows `kLdQ` elements apart) and P (`sP`, rows `kLdP` apart), and `k_lane` (x4) and `v_lane` (x4.trans), byte offsets inside a K or V tile of rows `kLdKV` elements apart (2-byte elements)"
  SOLUTION [=[  const std::uint32_t q_lane =
      ptx::smem_addr(sQ + (warp_row0 + lane % 16) * kLdQ + 8 * (lane / 16));
  const std::uint32_t p_lane =
      ptx::smem_addr(sP + (warp_row0 + lane % 16) * kLdP + 8 * (lane / 16));
  const std::uint32_t k_lane =
      static_cast<std::uint32_t>(2 * ((lane % 8 + 8 * (lane / 16)) * kLdKV + 8 * ((lane / 8) % 2)));
  const std::uint32_t v_lane =
      static_cast<std::uint32_t>(2 * ((lane % 16) * kLdKV + 8 * (lane / 16)));]=]
  STUB [=[  // Every lane at row 0, column 0 of each tile: write the four offsets.
  const std::uint32_t q_lane = ptx::smem_addr(sQ);
  const std::uint32_t p_lane = ptx::smem_addr(sP);
  const std::uint32_t k_lane = 0;
  const std::uint32_t v_lane = 0;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
