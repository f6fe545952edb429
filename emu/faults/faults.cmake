# emu/faults/faults.cmake — the planted faults: one flashsteps_fault() per fault (CMakeLists.txt
# says what each argument means; README.md how to run them). Each changes one line of a stage's
# source; FROM is that line with enough of its surroundings to occur exactly once.

# ---- 00_scalar --------------------------------------------------------------------------------
flashsteps_fault(00_pv_skips_first_key STAGE 00_scalar
  BREAKS "P V starts at key 1: every row loses its first key's contribution"
  FROM [=[    for (std::int64_t j = 0; j < end; ++j)]=]
  TO   [=[    for (std::int64_t j = 1; j < end; ++j)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(00_scale_dropped STAGE 00_scalar
  BREAKS "S is stored unscaled: the softmax scale is never applied"
  FROM [=[    s[idx] = acc * sh.scale;]=]
  TO   [=[    s[idx] = acc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

# ---- 01_tiled ---------------------------------------------------------------------------------
flashsteps_fault(01_missing_barrier STAGE 01_tiled
  BREAKS "no barrier between staging a Q/K chunk and reading it: threads read rows not yet staged"
  FROM [=[      __syncthreads();  // the chunk is staged: every thread reads rows other threads loaded]=]
  TO   [=[      // (planted fault: the barrier after staging the chunk is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(01_kv_tiles_off_by_one STAGE 01_tiled
  BREAKS "the number of key tiles rounds down: the ragged last tile of S is never computed"
  FROM [=[tiles_kv = ceil_div(sh.skv, Tile::kBc);]=]
  TO   [=[tiles_kv = sh.skv / Tile::kBc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

# ---- 02_wmma ----------------------------------------------------------------------------------
flashsteps_fault(02_missing_barrier_staged_s STAGE 02_wmma
  BREAKS "no barrier between the warps' stores of the S tile and the copy-out that reads them"
  FROM [=[    __syncthreads();  // the whole S tile is staged: each thread copies out other warps' values]=]
  TO   [=[    // (planted fault: the barrier after staging S is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(02_kv_tiles_off_by_one STAGE 02_wmma
  BREAKS "the number of key tiles rounds down: the ragged last tile of S is never computed"
  FROM [=[tiles_kv = ceil_div(sh.skv, Tile::kBc);]=]
  TO   [=[tiles_kv = sh.skv / Tile::kBc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(02_missing_tail_zero_fill STAGE 02_wmma
  BREAKS "copy_tile leaves the vectors past the ragged edge unwritten instead of zero-filled"
  FROM [=[    *reinterpret_cast<uint4*>(dst + r * kLd + c) = val;]=]
  TO   [=[    if (r < rows && c < cols) *reinterpret_cast<uint4*>(dst + r * kLd + c) = val;]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "every head dimension*")

# ---- 03_online_softmax ------------------------------------------------------------------------
flashsteps_fault(03_tiles_off_by_one STAGE 03_online_softmax
  BREAKS "Tc_i rounds down: the ragged last key tile is skipped"
  FROM [=[  const int Tc_i = (kv_stop + Bc - 1) / Bc;]=]
  TO   [=[  const int Tc_i = kv_stop / Bc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_tail_zero_fill STAGE 03_online_softmax
  BREAKS "load_tile leaves rows past the last key unwritten instead of zero-filled"
  FROM [=[    *reinterpret_cast<uint4*>(dst + r * ld + c * Tile::kVec) = piece;]=]
  TO   [=[    if (row0 + r < n_rows) *reinterpret_cast<uint4*>(dst + r * ld + c * Tile::kVec) = piece;]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "ragged tails*")

flashsteps_fault(03_missing_barrier_q STAGE 03_online_softmax
  BREAKS "no barrier after loading Q_i and zeroing O_i: a block that sees no key reads O rows other warps zero"
  FROM [=[  __syncthreads();  // Q_i and the zeroed O_i are complete before any warp reads them]=]
  TO   [=[  // (planted fault: the barrier after loading Q_i and zeroing O_i is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "Sq != Skv both ways*")

# ---- 04_cp_async ------------------------------------------------------------------------------
flashsteps_fault(04_wait_prior_count STAGE 04_cp_async
  BREAKS "cp.async.wait_group waits one group too few: tile j is read while its copies still fly"
  FROM [=[    cuda::pipeline_consumer_wait_prior<kStages - 2>(pipe);]=]
  TO   [=[    cuda::pipeline_consumer_wait_prior<kStages - 1>(pipe);]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(04_missing_barrier_a STAGE 04_cp_async
  BREAKS "barrier (A) is gone: other threads' copies of K_j, V_j are not known to have landed"
  FROM [=[    __syncthreads();
    //! [wait]]=]
  TO   [=[    // (planted fault: barrier (A) is gone)
    //! [wait]]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(04_missing_drain STAGE 04_cp_async
  BREAKS "the epilogue no longer drains the pipeline: copies (Q's, when no tile is visited) outlive the thread"
  FROM [=[  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncwarp();]=]
  TO   [=[  // (planted fault: the final wait_group 0 is gone)
  __syncwarp();]=]
  EXPECT "cp.async copies it never waited for" TESTS "Sq != Skv both ways*")

flashsteps_fault(04_missing_tail_zero_fill STAGE 04_cp_async
  BREAKS "rows past the last key are neither copied nor zero-filled"
  FROM [=[      *reinterpret_cast<uint4*>(piece) = make_uint4(0u, 0u, 0u, 0u);]=]
  TO   [=[      // (planted fault: the zero fill is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "every head dimension*")

flashsteps_fault(04_shuffle_mask STAGE 04_cp_async
  BREAKS "the max shuffle's member mask leaves out the upper 16 lanes"
  FROM [=[      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));]=]
  TO   [=[      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFu, tile_max, 1));]=]
  EXPECT "the member mask 0xffff does not include the calling lane" TESTS "a non-default softmax scale")

# ---- 05_warp_specialized ----------------------------------------------------------------------
flashsteps_fault(05_consumer_parity STAGE 05_warp_specialized
  BREAKS "consumers wait on the wrong parity of full[s]: the fresh barrier's previous phase passes at once"
  FROM [=[    wait_phase(full[stage], (j / kStages) & 1, "full", stage);]=]
  TO   [=[    wait_phase(full[stage], ((j / kStages) & 1) ^ 1, "full", stage);]=]
  EXPECT "deadlock: every live thread of the block waits" TESTS "a non-default softmax scale")

flashsteps_fault(05_producer_parity STAGE 05_warp_specialized
  BREAKS "the producer waits on the wrong parity of empty[s]: it refills a stage the consumers still read"
  FROM [=[      if (j >= kStages) wait_phase(empty[s], (j / kStages - 1) & 1, "empty", s);]=]
  TO   [=[      if (j >= kStages) wait_phase(empty[s], (j / kStages) & 1, "empty", s);]=]
  EXPECT "arrive-on in phase 1 before any test_wait" TESTS "a non-default softmax scale")

flashsteps_fault(05_dropped_release STAGE 05_warp_specialized
  BREAKS "consumers never arrive on empty[s]: the producer waits for a release that never comes"
  FROM [=[    (void)empty[stage].arrive();]=]
  TO   [=[    // (planted fault: the release of the stage is gone)]=]
  EXPECT "deadlock: every live thread.* 128 of 128 arrivals pending" TESTS "a non-default softmax scale")

flashsteps_fault(05_missing_zero_fill STAGE 05_warp_specialized
  BREAKS "rows past the last key are no longer zero-filled by cp.async (src-size 0)"
  FROM [=[      __pipeline_memcpy_async(piece, src, 16, /*zfill=*/16);]=]
  TO   [=[      // (planted fault: the zero fill is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "every head dimension*")

# ---- 06a_mma_sync -----------------------------------------------------------------------------
flashsteps_fault(06a_s_rows_swapped STAGE 06a_mma_sync
  BREAKS "a lane stores c2, c3 (row g + 8) where c0, c1 (row g) belong: the S accumulator's layout misread"
  FROM [=[        *reinterpret_cast<float2*>(s_el) = make_float2(s_acc[n][0], s_acc[n][1]);]=]
  TO   [=[        *reinterpret_cast<float2*>(s_el) = make_float2(s_acc[n][2], s_acc[n][3]);]=]
  EXPECT "[1-9][0-9]* rows of LSE wrong" TESTS "a non-default softmax scale")

flashsteps_fault(06a_v_without_trans STAGE 06a_mma_sync
  BREAKS "V_j is read by ldmatrix without .trans: the B operand gets rows of V where it needs columns"
  FROM [=[          ptx::ldmatrix_x4_trans(vb, sV + 2u * (16 * kk * kLdKV + 16 * dp) + v_lane);]=]
  TO   [=[          ptx::ldmatrix_x4(vb, sV + 2u * (16 * kk * kLdKV + 16 * dp) + v_lane);]=]
  EXPECT "LSE right, only O wrong" TESTS "a non-default softmax scale")

flashsteps_fault(06a_a_matrix_order STAGE 06a_mma_sync
  BREAKS "Q's ldmatrix lanes follow K's matrix order: a1 and a2 (rows 8-15 at k 0-7, rows 0-7 at k 8-15) are exchanged"
  FROM [=[      ptx::smem_addr(sQ + (warp_row0 + lane % 16) * kLdQ + 8 * (lane / 16));]=]
  TO   [=[      ptx::smem_addr(sQ + (warp_row0 + lane % 8 + 8 * (lane / 16)) * kLdQ + 8 * ((lane / 8) % 2));]=]
  EXPECT "[1-9][0-9]* rows of LSE wrong" TESTS "a non-default softmax scale")

# ---- 06b_registers ----------------------------------------------------------------------------
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

flashsteps_fault(06b_unmasked_tiles_off_by_one STAGE 06b_registers
  BREAKS "Tc_full rounds up: the diagonal tile takes the unmasked path"
  FROM [=[  const int Tc_full = kv_full / Bc;  // tiles 0 .. Tc_full-1 need no mask (<= Tc_i)]=]
  TO   [=[  const int Tc_full = (kv_full + Bc - 1) / Bc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

# ---- 06c_swizzle ------------------------------------------------------------------------------
flashsteps_fault(06c_swapped_b_fragment STAGE 06c_swizzle
  BREAKS "the two B registers of S's even n8 tiles are swapped (k 0-7 and 8-15 exchanged)"
  FROM [=[        ptx::mma_m16n8k16<T>(s_acc[2 * np], q_frag[kk], {kb[0], kb[1]});]=]
  TO   [=[        ptx::mma_m16n8k16<T>(s_acc[2 * np], q_frag[kk], {kb[1], kb[0]});]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(06c_wrong_swizzle STAGE 06c_swizzle
  BREAKS "the swizzle XORs with r % 4, not r % 8: the copies and ldmatrix offsets disagree"
  FROM [=[  return r * kD + ((c ^ (r % 8)) * 8);]=]
  TO   [=[  return r * kD + ((c ^ (r % 4)) * 8);]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(06c_missing_barrier STAGE 06c_swizzle
  BREAKS "the tile's only block-wide barrier is gone: other threads' copies are not known to have landed"
  FROM [=[    __syncthreads();
    prefetch(j + kStages - 1);]=]
  TO   [=[    // (planted fault: barrier (A) is gone)
    prefetch(j + kStages - 1);]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(06c_unmasked_tiles_off_by_one STAGE 06c_swizzle
  BREAKS "Tc_full rounds up: the diagonal tile takes the unmasked path"
  FROM [=[  const int Tc_full = kv_full / Bc;  // tiles 0 .. Tc_full-1 need no mask (<= Tc_i)]=]
  TO   [=[  const int Tc_full = (kv_full + Bc - 1) / Bc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

# ---- 07a_wgmma --------------------------------------------------------------------------------
flashsteps_fault(07a_s_wait_group_count STAGE 07a_wgmma
  BREAKS "wgmma.wait_group<1> after S = Q K^T leaves its only group in flight: the mask and softmax write accumulators the wgmma still owns"
  FROM [=[    // Synchronous: S_ij is complete before anything reads it (nothing overlaps the softmax).
    ptx::wgmma_wait_group<0>();]=]
  TO   [=[    // Synchronous: S_ij is complete before anything reads it (nothing overlaps the softmax).
    ptx::wgmma_wait_group<1>();]=]
  EXPECT "writes register [0-9]+ of its accumulator fragment .* still in flight" TESTS "a non-default softmax scale")

flashsteps_fault(07a_missing_fence_proxy_async STAGE 07a_wgmma
  BREAKS "no fence.proxy.async between the cp.async copies (generic proxy) and the wgmmas that read them (async proxy)"
  FROM [=[    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    __syncthreads();]=]
  TO   [=[    // (planted fault: fence.proxy.async is gone)
    __syncthreads();]=]
  EXPECT "wgmma.mma_async \\([AB] operand\\) reads shared memory at 0x[0-9a-f]+ that ordinary stores changed after the last fence.proxy.async" TESTS "a non-default softmax scale")

flashsteps_fault(07a_swizzle_without_xor STAGE 07a_wgmma
  BREAKS "the copies place chunk c of row r at position c, not c ^ (r % 8): the descriptors' 128-byte swizzle reads other chunks"
  FROM [=[  return (c / 8) * kRows * 64 + r * 64 + ((c % 8) ^ (r % 8)) * 8;]=]
  TO   [=[  return (c / 8) * kRows * 64 + r * 64 + (c % 8) * 8;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(07a_v_desc_lbo STAGE 07a_wgmma
  BREAKS "V's descriptor has a leading byte offset of half a column block: at D = 128, O's columns 64..127 read V from the wrong rows"
  FROM [=[        static_cast<std::uint32_t>(Tile::kKVBlockBytes), Tile::kAtomBytes);]=]
  TO   [=[        static_cast<std::uint32_t>(Tile::kKVBlockBytes / 2), Tile::kAtomBytes);]=]
  EXPECT "heads: FAIL" TESTS "every head dimension the stage supports*")

flashsteps_fault(07a_pv_wait_dropped STAGE 07a_wgmma
  BREAKS "no wgmma.wait_group after O += P V: the next tile's barrier no longer tells that the stage is free, and its prefetch overwrites V_j while the wgmma may still read it"
  FROM [=[    // Synchronous again: O is complete, and P's registers and stage s are free, when this returns.
    ptx::wgmma_wait_group<0>();]=]
  TO   [=[    // Synchronous again: O is complete, and P's registers and stage s are free, when this returns.
    // (planted fault: the wait is gone)]=]
  EXPECT "cp.async.* writes shared memory 0x[0-9a-f]+..0x[0-9a-f]+, of which 0x[0-9a-f]+ is an operand byte that wgmma.mma_async.m64n64k16 #[0-9]+ of warpgroup 0 .* may still read \\(its B operand\\)"
  TESTS "same inputs twice*")

# ---- 07b_tma_roles ----------------------------------------------------------------------------
flashsteps_fault(07b_dropped_empty_arrive STAGE 07b_tma_roles
  BREAKS "consumers never release a stage of the ring: the producer waits on empty[s] forever once it wraps"
  FROM [=[      cuda::ptx::mbarrier_arrive(&empty[s]);  // K_j, V_j may be overwritten]=]
  TO   [=[      // (planted fault: the release of the stage is gone)]=]
  EXPECT "deadlock: every live thread.* 256 of 256 arrivals pending" TESTS "same inputs twice*")

flashsteps_fault(07b_s_read_before_wait STAGE 07b_tma_roles
  BREAKS "no wgmma.wait_group after S = Q K^T: the mask and the softmax read and write S while its wgmmas still run"
  FROM [=[      // Wait for S_j before reading it: nothing else is in flight.
      ptx::wgmma_wait_group<0>();]=]
  TO   [=[      // Wait for S_j before reading it: nothing else is in flight.
      // (planted fault: the wait for S_j is gone)]=]
  EXPECT "of its accumulator fragment .* still in flight" TESTS "a non-default softmax scale")

flashsteps_fault(07b_v_expect_tx_one_block STAGE 07b_tma_roles
  BREAKS "V's expect_tx counts one 64-column block of the two at D = 128: v_full completes with half of V_j in flight"
  FROM [=[                                             cuda::ptx::space_shared, &v_full[s],
                                             static_cast<std::uint32_t>(Tile::kKVBytes));]=]
  TO   [=[                                             cuda::ptx::space_shared, &v_full[s],
                                             static_cast<std::uint32_t>(Tile::kKVBlockBytes));]=]
  EXPECT "while 1 TMA load\\(s\\) tracked by it, 16384 bytes, had not landed: the phase's expect_tx announced fewer bytes"
  TESTS "every head dimension the stage supports*")

# ---- 07c_overlap ------------------------------------------------------------------------------
flashsteps_fault(07c_missing_wgmma_fence STAGE 07c_overlap
  BREAKS "no wgmma.fence before S = Q K^T"
  FROM [=[      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Tile::kQK; ++kk)]=]
  TO   [=[      // (planted fault: wgmma.fence is gone)
#pragma unroll
      for (int kk = 0; kk < Tile::kQK; ++kk)]=]
  EXPECT "wgmma.mma_async without a wgmma.fence" TESTS "a non-default softmax scale")

flashsteps_fault(07c_wait_group_count STAGE 07c_overlap
  BREAKS "wgmma.wait_group leaves S_j in flight: the softmax reads accumulators not yet written"
  FROM [=[      ptx::wgmma_wait_group<kFirst ? 0 : 1>();]=]
  TO   [=[      ptx::wgmma_wait_group<kFirst ? 1 : 2>();]=]
  EXPECT "writes register [0-9]+ of its accumulator fragment .* still in flight" TESTS "a non-default softmax scale")

flashsteps_fault(07c_q_desc_sbo STAGE 07c_overlap
  BREAKS "Q's wgmma descriptor has a stride byte offset of half a swizzle atom"
  FROM [=[          q_base + static_cast<std::uint32_t>((kk / 4) * Tile::kQBlockBytes + (kk % 4) * 32), 16,
          Tile::kAtomBytes);]=]
  TO   [=[          q_base + static_cast<std::uint32_t>((kk / 4) * Tile::kQBlockBytes + (kk % 4) * 32), 16,
          Tile::kAtomBytes / 2);]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(07c_consumer_parity STAGE 07c_overlap
  BREAKS "consumers wait on the wrong parity of k_full[s]: the fresh barrier's previous phase passes at once"
  FROM [=[      wait_parity(&k_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "k_full", s);]=]
  TO   [=[      wait_parity(&k_full[s], (static_cast<std::uint32_t>(j / kStages) & 1u) ^ 1u, "k_full", s);]=]
  EXPECT "deadlock: every live thread of the block waits" TESTS "a non-default softmax scale")

flashsteps_fault(07c_missing_fence_proxy_async STAGE 07c_overlap
  BREAKS "no fence.proxy.async between the O staging stores and the TMA store that reads them"
  FROM [=[    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);]=]
  TO   [=[    // (planted fault: fence.proxy.async is gone)]=]
  EXPECT "changed after the last fence.proxy.async" TESTS "a non-default softmax scale")

flashsteps_fault(07c_dropped_turn_arrive STAGE 07c_overlap
  BREAKS "consumer 1 never opens consumer 0's first turn: consumer 0 waits at its named barrier forever"
  FROM [=[    if (cw == 1 && Tc_i > 0) ptx::named_barrier_arrive(kBarTurn + 0, Tile::kConsumerThreads);]=]
  TO   [=[    // (planted fault: the arrive that opens consumer 0's first turn is gone)]=]
  EXPECT "deadlock: every live thread.* bar.sync \\(named barrier\\) \\(barrier 1: 128 of 256 threads arrived\\)" TESTS "a non-default softmax scale")

flashsteps_fault(07c_dropped_empty_arrive STAGE 07c_overlap
  BREAKS "consumers never release a stage of the ring: the producer waits on empty[s] forever"
  FROM [=[        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten]=]
  TO   [=[        (void)sp;  // (planted fault: the release of the stage is gone)]=]
  EXPECT "deadlock: every live thread.* 256 of 256 arrivals pending" TESTS "same inputs twice*")

flashsteps_fault(07c_swapped_p_fragment STAGE 07c_overlap
  BREAKS "P's register A operand takes row g's keys 8+2t.. in place of row g+8's keys 2t.."
  FROM [=[        p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);  // row g + 8]=]
  TO   [=[        p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);  // row g + 8]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(07c_missing_store_barrier STAGE 07c_overlap
  BREAKS "the named barrier before the TMA store is gone: thread 0 stores O before the others staged it"
  FROM [=[    ptx::named_barrier_sync(kBarStore + cw, Tile::kWarpgroupThreads);]=]
  TO   [=[    // (planted fault: the store barrier is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

# ---- Asynchronous lifetimes (issue 20): each passes on the emulator of 1d36caf, which ran a
# wgmma, a TMA load and setmaxnreg as instants ------------------------------------------------
flashsteps_fault(07c_empty_arrive_before_pv_wait STAGE 07c_overlap
  BREAKS "consumers release stage j-1 before the wgmma.wait_group that covers P_{j-1} V_{j-1}: the producer's TMA overwrites V while the wgmma may still read it"
  FROM [=[      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o_acc);
      ptx::wgmma_fence_operand(p_frag);
      if constexpr (!kFirst)
        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten]=]
  TO   [=[      ptx::wgmma_fence_operand(o_acc);
      ptx::wgmma_fence_operand(p_frag);
      if constexpr (!kFirst)
        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten
      ptx::wgmma_wait_group<0>();]=]
  EXPECT "a TMA load \\(cp.async.bulk.tensor\\) issued at .*kernels.cu:[0-9]+.* writes shared memory 0x[0-9a-f]+..0x[0-9a-f]+, of which 0x[0-9a-f]+ is an operand byte that wgmma.mma_async.m64n64k16 #[0-9]+ of warpgroup [12] \\(issued at .*kernels.cu:[0-9]+\\)\\) may still read \\(its B operand\\)"
  TESTS "same inputs twice*")

flashsteps_fault(07c_s_reset_in_flight STAGE 07c_overlap
  BREAKS "S is reset to -inf right after its wgmmas are issued: the reset writes accumulators the wgmma is still writing"
  FROM [=[        ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
      ptx::wgmma_commit_group();]=]
  TO   [=[        ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
      ptx::wgmma_commit_group(); for (float& x : s_acc) x = -INFINITY;  // (planted: S reset in flight)]=]
  EXPECT "a store of [0-9]+ bytes at .*kernels.cu:[0-9]+.* writes register 0 of its accumulator fragment \\(64 fp32 registers: d\\[0..63\\]\\) of wgmma.mma_async.m64n128k16 #[0-9]+ .*still in flight"
  TESTS "a non-default softmax scale")

flashsteps_fault(07c_q_expect_tx_one_block STAGE 07c_overlap
  BREAKS "Q's expect_tx counts one 64-column block of the two at D = 128: q_full completes with half of Q in flight"
  FROM [=[                                           static_cast<std::uint32_t>(Tile::kQBytes));]=]
  TO   [=[                                           static_cast<std::uint32_t>(Tile::kQBlockBytes));]=]
  EXPECT "completed phase 0 .* while 1 TMA load\\(s\\) tracked by it, 16384 bytes, had not landed: the phase's expect_tx announced fewer bytes"
  TESTS "every head dimension the stage supports*")

flashsteps_fault(07c_setmaxnreg_dec_raises STAGE 07c_overlap
  BREAKS "the producer's setmaxnreg.dec asks for 176 registers, more than the 168 the kernel is launched with"
  FROM [=[    ptx::setmaxnreg_dec<Tile::kProducerRegs>();]=]
  TO   [=[    ptx::setmaxnreg_dec<176>();]=]
  EXPECT "setmaxnreg.dec to 176 from 168 registers per thread \\(the kernel's count at launch: .*\\): .inc must not lower the count, .dec must not raise it"
  TESTS "a non-default softmax scale")

flashsteps_fault(07c_setmaxnreg_inc_beyond_pool STAGE 07c_overlap
  BREAKS "the consumers' setmaxnreg.inc asks for 248 registers: the block's pool (what the producer released) cannot give both warpgroups that many"
  FROM [=[    ptx::setmaxnreg_inc<Tile::kConsumerRegs>();]=]
  TO   [=[    ptx::setmaxnreg_inc<248>();]=]
  EXPECT "deadlock: every live thread.*setmaxnreg.inc to 248 from 168 registers per thread .*needs 10240 registers from the block's pool, which holds 8192"
  TESTS "a non-default softmax scale")

# ---- Missing barriers between warps that run in step (caught since the scheduler lets each
# warp run ahead of the others: emu/src/scheduler.cpp, run_block) -----------------------------
flashsteps_fault(03_missing_barrier_a STAGE 03_online_softmax
  BREAKS "no barrier (A): warps multiply with K_j rows other warps have not loaded yet"
  FROM [=[    __syncthreads();  // (A) K_j is complete before any warp multiplies with it]=]
  TO   [=[    // (planted fault: barrier (A) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_barrier_b STAGE 03_online_softmax
  BREAKS "no barrier (B): V_j overwrites the K_j buffer while other warps still multiply with it"
  FROM [=[    // warp stored is visible to all of its lanes (the softmax reads it in a different layout).
    __syncthreads();]=]
  TO   [=[    // warp stored is visible to all of its lanes (the softmax reads it in a different layout).
    // (planted fault: barrier (B) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_barrier_c STAGE 03_online_softmax
  BREAKS "no barrier (C): warps multiply P with V_j rows other warps have not loaded yet"
  FROM [=[    // the warp's fragment loads below.
    __syncthreads();]=]
  TO   [=[    // the warp's fragment loads below.
    // (planted fault: barrier (C) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(03_missing_barrier_d STAGE 03_online_softmax
  BREAKS "no barrier (D): K_{j+1} overwrites V_j while other warps still multiply with it"
  FROM [=[    // tile, the O strips stored above are visible to the epilogue's lanes.
    __syncthreads();]=]
  TO   [=[    // tile, the O strips stored above are visible to the epilogue's lanes.
    // (planted fault: barrier (D) is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(02_missing_barrier_before_staging STAGE 02_wmma
  BREAKS "no barrier before the S staging tile overwrites Q and K that other warps still read"
  FROM [=[    __syncthreads();  // every warp is done with Q and K: the staging tile overwrites them]=]
  TO   [=[    // (planted fault: the barrier before the staging tile overwrites Q and K is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")


# ---- baseline_cublas --------------------------------------------------------------------------
# S and P are stored at a padded row pitch (score_pitch); Skv = 300 in the test below is not a
# multiple of 8, so a call that mixes up Skv and the pitch reads the wrong rows.
flashsteps_fault(baseline_softmax_reads_unpadded_s STAGE baseline_cublas
  BREAKS "the softmax reads S at pitch Skv although the first GEMM wrote it at the padded pitch"
  FROM [=[{pr.batch_heads() * pr.seq_q, sq, skv, ld, ld}]=]
  TO   [=[{pr.batch_heads() * pr.seq_q, sq, skv, skv, ld}]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(baseline_pv_reads_unpadded_p STAGE baseline_cublas
  BREAKS "the second GEMM reads P at pitch Skv although the softmax wrote it at the padded pitch"
  FROM [=[p, cuda_type<T>(), ld, static_cast<long long>(sq) * ld,]=]
  TO   [=[p, cuda_type<T>(), skv, static_cast<long long>(sq) * ld,]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
