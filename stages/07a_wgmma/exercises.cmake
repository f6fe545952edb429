# stages/07a_wgmma/exercises.cmake — the exercise of 07a_wgmma that asks the reader to write the
# step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.
# All three descriptors are cut: with Q's and K's left in place, V's would be a copy with one
# offset changed.

flashsteps_exercise(07a_write_descriptors STAGE 07a_wgmma
  TASK "write the three wgmma descriptors with `ptx::wgmma_desc_sw128(start, lbo, sbo)`: `q_desc(kk)` for k16 step kk of Q (64, D) and `k_desc(s, kk)` for K_j in ring stage `s`, both K-major, and `v_desc(s, kk)` for V_j's keys 16kk..16kk+15, all D columns, MN-major: each a start address (`ptx::smem_addr` of `sQ`, `stage_k(s)`, `stage_v(s)`), a leading byte offset and a stride byte offset, from the tile's `kQBlockBytes`, `kKVBlockBytes`, `kSwizzleBytes` and `kAtomBytes` (the comment above the region says what each operand's layout is, and ptx.cuh what the two offsets mean for each major-ness)"
  SOLUTION [=[  auto q_desc = [&](int kk) {  // k16 step kk of D
    return ptx::wgmma_desc_sw128(
        ptx::smem_addr(sQ) +
            static_cast<std::uint32_t>((kk / 4) * Tile::kQBlockBytes + (kk % 4) * 32),
        16, Tile::kAtomBytes);
  };
  auto k_desc = [&](int s, int kk) {
    return ptx::wgmma_desc_sw128(
        ptx::smem_addr(stage_k(s)) +
            static_cast<std::uint32_t>((kk / 4) * Tile::kKVBlockBytes + (kk % 4) * 32),
        16, Tile::kAtomBytes);
  };
  auto v_desc = [&](int s, int kk) {  // keys 16 kk .. 16 kk + 15, all D columns
    return ptx::wgmma_desc_sw128(
        ptx::smem_addr(stage_v(s)) + static_cast<std::uint32_t>(kk * 16 * Tile::kSwizzleBytes),
        static_cast<std::uint32_t>(Tile::kKVBlockBytes), Tile::kAtomBytes);
  };]=]
  STUB [=[  auto q_desc = [&](int kk) {  // k16 step kk of D
    return ptx::wgmma_desc_sw128(ptx::smem_addr(sQ) + 0u * kk, 0u, 0u);  // write it
  };
  auto k_desc = [&](int s, int kk) {
    return ptx::wgmma_desc_sw128(ptx::smem_addr(stage_k(s)) + 0u * kk, 0u, 0u);  // write it
  };
  auto v_desc = [&](int s, int kk) {  // keys 16 kk .. 16 kk + 15, all D columns
    return ptx::wgmma_desc_sw128(ptx::smem_addr(stage_v(s)) + 0u * kk, 0u, 0u);  // write it
  };]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
