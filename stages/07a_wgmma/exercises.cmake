# stages/07a_wgmma/exercises.cmake — the exercise of 07a_wgmma that asks the reader to write the
# step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.

flashsteps_exercise(07a_write_v_descriptor STAGE 07a_wgmma
  TASK "write `v_desc(s, kk)`, the wgmma descriptor of V_j's keys 16kk..16kk+15 in ring stage `s`, all D columns, MN-major and 128-byte swizzled: its start address, its leading byte offset (where the next 64 columns of n start, D = 128) and its stride byte offset (the next 8 rows of k), with `ptx::wgmma_desc_sw128(start, lbo, sbo)` and the tile's `kSwizzleBytes`, `kKVBlockBytes`, `kAtomBytes` (the comment above the region says how Q and K do it)"
  SOLUTION [=[  auto v_desc = [&](int s, int kk) {  // keys 16 kk .. 16 kk + 15, all D columns
    return ptx::wgmma_desc_sw128(
        ptx::smem_addr(stage_v(s)) + static_cast<std::uint32_t>(kk * 16 * Tile::kSwizzleBytes),
        static_cast<std::uint32_t>(Tile::kKVBlockBytes), Tile::kAtomBytes);
  };]=]
  STUB [=[  auto v_desc = [&](int s, int kk) {  // keys 16 kk .. 16 kk + 15, all D columns
    return ptx::wgmma_desc_sw128(ptx::smem_addr(stage_v(s)) + 0u * kk, 0u, 0u);  // write it
  };]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale,every head dimension the stage supports*")
