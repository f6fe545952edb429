# stages/06c_swizzle/exercises.cmake — the exercise of 06c_swizzle that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once. The ldmatrix lane offsets that read the swizzled layout are cut with it (two
# regions): they carry the same XOR, which the reader could copy into `swizzle()`.

flashsteps_exercise(06c_write_swizzle STAGE 06c_swizzle
  TASK "write `swizzle(r, c)`: where 16-byte chunk c of row r of an unpadded (rows, `kD`) tile lives, in elements from its start, so that the 8 rows of an ldmatrix phase and the 8 chunks of a cp.async row fall in 8 different 4-bank groups (the picture above), then, in the second region, `k_lane` (x4) and `v_lane` (x4.trans), this lane's byte offsets into a stage of that layout (rows D * 2 bytes) at chunk pair c = 0, which `chunk_pair()` below steps along the row (the comment above them says which row and chunk each lane points at)"
  SOLUTION [=[  return r * kD + ((c ^ (r % 8)) * 8);
...
  const std::uint32_t k_lane = static_cast<std::uint32_t>((lane % 8 + 8 * (lane / 16)) * D * 2 +
                                                          16 * (((lane / 8) % 2) ^ (lane % 8)));
  const std::uint32_t v_lane =
      static_cast<std::uint32_t>((lane % 16) * D * 2 + 16 * ((lane / 16) ^ (lane % 8)));]=]
  STUB [=[  return r * kD + c * 8;  // unswizzled: write the swizzle
...
  const std::uint32_t k_lane = 0;  // every lane at row 0, chunk 0: write the offsets
  const std::uint32_t v_lane = 0;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
