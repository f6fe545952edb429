# stages/06a_mma_sync/exercises.cmake — the exercise of 06a_mma_sync that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.

flashsteps_exercise(06a_write_v_lanes STAGE 06a_mma_sync
  TASK "write `v_lane`, this lane's byte offset in V_j for `ldmatrix.x4.trans`: lane 8m + i addresses row i of matrix m, and matrices 0..3 are (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15) of a padded tile with rows `kLdKV` elements apart"
  SOLUTION [=[  const std::uint32_t v_lane =
      static_cast<std::uint32_t>(2 * ((lane % 16) * kLdKV + 8 * (lane / 16)));]=]
  STUB [=[  const std::uint32_t v_lane = 0;  // every lane at key 0, d 0: write the offset]=]
  EXPECT "LSE right, only O wrong" TESTS "a non-default softmax scale")
