# stages/06c_swizzle/exercises.cmake — the exercise of 06c_swizzle that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once.

flashsteps_exercise(06c_write_swizzle STAGE 06c_swizzle
  TASK "write `swizzle(r, c)`: where 16-byte chunk c of row r of an unpadded (rows, `kD`) tile lives, in elements from its start, so that the 8 rows of an ldmatrix phase and the 8 chunks of a cp.async row fall in 8 different 4-bank groups (the picture above: `k_lane`, `v_lane` and `chunk_pair()` below already read that layout)"
  SOLUTION [=[  return r * kD + ((c ^ (r % 8)) * 8);]=]
  STUB [=[  return r * kD + c * 8;  // unswizzled: the ldmatrix offsets below disagree]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
