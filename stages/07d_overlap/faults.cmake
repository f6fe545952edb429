# stages/07d_overlap/faults.cmake — the planted faults of 07d_overlap: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(07d_missing_wgmma_fence STAGE 07d_overlap
  BREAKS "no wgmma.fence before S = Q K^T"
  FROM [=[    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tile::kQK; ++kk)]=]
  TO   [=[    // (planted fault: wgmma.fence is gone)
#pragma unroll
    for (int kk = 0; kk < Tile::kQK; ++kk)]=]
  EXPECT "wgmma.mma_async without a wgmma.fence" TESTS "a non-default softmax scale")

flashsteps_fault(07d_wait_group_count STAGE 07d_overlap
  BREAKS "wgmma.wait_group leaves S_j in flight: the softmax reads accumulators the wgmma may still be writing, so on hardware the result depends on timing (wrong when S_j is late, right by chance when it is not)"
  FROM [=[    ptx::wgmma_wait_group<kFirst ? 0 : 1>();]=]
  TO   [=[    ptx::wgmma_wait_group<kFirst ? 1 : 2>();]=]
  EXPECT "writes register [0-9]+ of its accumulator fragment .* still in flight" TESTS "a non-default softmax scale")

flashsteps_fault(07d_q_desc_sbo STAGE 07d_overlap
  BREAKS "Q's wgmma descriptor has a stride byte offset of half a swizzle atom"
  FROM [=[        q_base + static_cast<std::uint32_t>((kk / 4) * Tile::kQBlockBytes + (kk % 4) * 32), 16,
        Tile::kAtomBytes);]=]
  TO   [=[        q_base + static_cast<std::uint32_t>((kk / 4) * Tile::kQBlockBytes + (kk % 4) * 32), 16,
        Tile::kAtomBytes / 2);]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(07d_consumer_parity STAGE 07d_overlap
  BREAKS "consumers wait on the wrong parity of k_full[s], and on hardware the outcome depends on timing: a wait made before K_j lands passes at once (a fresh barrier's phase before phase 0 counts as complete) and S_j reads a stage TMA is still writing, a silent wrong result, while a wait made after K_j has landed waits for the next phase, which needs this tile's own release of the stage, and hangs"
  FROM [=[    wait_parity(&k_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "k_full", s);]=]
  TO   [=[    wait_parity(&k_full[s], (static_cast<std::uint32_t>(j / kStages) & 1u) ^ 1u, "k_full", s);]=]
  EXPECT "deadlock: every live thread of the block waits" TESTS "a non-default softmax scale")

flashsteps_fault(07d_missing_fence_proxy_async STAGE 07d_overlap
  BREAKS "no fence.proxy.async between the O staging stores and the TMA store that reads them"
  FROM [=[  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);]=]
  TO   [=[  // (planted fault: fence.proxy.async is gone)]=]
  EXPECT "changed after the last fence.proxy.async" TESTS "a non-default softmax scale")

flashsteps_fault(07d_dropped_turn_arrive STAGE 07d_overlap
  BREAKS "consumer 1 never opens consumer 0's first turn: consumer 0 waits at its named barrier forever"
  FROM [=[  if (cw == 1 && Tc_i > 0) ptx::named_barrier_arrive(kBarTurn + 0, Tile::kConsumerThreads);]=]
  TO   [=[  // (planted fault: the arrive that opens consumer 0's first turn is gone)]=]
  EXPECT "deadlock: every live thread.* bar.sync \\(named barrier\\) \\(barrier 1: 128 of 256 threads arrived\\)" TESTS "a non-default softmax scale")

flashsteps_fault(07d_dropped_empty_arrive STAGE 07d_overlap
  BREAKS "consumers never release a stage of the ring: the producer waits on empty[s] forever"
  FROM [=[      cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten]=]
  TO   [=[      (void)sp;  // (planted fault: the release of the stage is gone)]=]
  EXPECT "deadlock: every live thread.* 256 of 256 arrivals pending" TESTS "same inputs twice*")

flashsteps_fault(07d_swapped_p_fragment STAGE 07d_overlap
  BREAKS "P's register A operand takes row g's keys 8+2t.. in place of row g+8's keys 2t.."
  FROM [=[      p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);  // row g + 8]=]
  TO   [=[      p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);  // row g + 8]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(07d_missing_store_barrier STAGE 07d_overlap
  BREAKS "the named barrier before the TMA store is gone: thread 0 stores O before the others staged it"
  FROM [=[  ptx::named_barrier_sync(kBarStore + cw, Tile::kWarpgroupThreads);]=]
  TO   [=[  // (planted fault: the store barrier is gone)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

# Asynchronous lifetimes (issue 20): each passes on the emulator of 1d36caf, which ran a wgmma, a
# TMA load and setmaxnreg as instants
flashsteps_fault(07d_empty_arrive_before_pv_wait STAGE 07d_overlap
  BREAKS "consumers release stage j-1 before the wgmma.wait_group that covers P_{j-1} V_{j-1}: the producer's TMA overwrites V while the wgmma may still read it"
  FROM [=[    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o_acc);
    ptx::wgmma_fence_operand(p_frag);
    if constexpr (!kFirst)
      cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten]=]
  TO   [=[    ptx::wgmma_fence_operand(o_acc);
    ptx::wgmma_fence_operand(p_frag);
    if constexpr (!kFirst)
      cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten
    ptx::wgmma_wait_group<0>();]=]
  EXPECT "a TMA load \\(cp.async.bulk.tensor\\) issued at .*kernels.cu:[0-9]+.* writes shared memory 0x[0-9a-f]+..0x[0-9a-f]+, of which 0x[0-9a-f]+ is an operand byte that wgmma.mma_async.m64n64k16 #[0-9]+ of warpgroup [12] \\(issued at .*kernels.cu:[0-9]+\\)\\) may still read \\(its B operand\\)"
  TESTS "same inputs twice*")

flashsteps_fault(07d_s_reset_in_flight STAGE 07d_overlap
  BREAKS "S is reset to -inf right after its wgmmas are issued: the reset writes accumulators the wgmma is still writing"
  FROM [=[      ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
    ptx::wgmma_commit_group();]=]
  TO   [=[      ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
    ptx::wgmma_commit_group(); for (float& x : s_acc) x = -INFINITY;  // (planted: S reset in flight)]=]
  EXPECT "a store of [0-9]+ bytes at .*kernels.cu:[0-9]+.* writes register 0 of its accumulator fragment \\(64 fp32 registers: d\\[0..63\\]\\) of wgmma.mma_async.m64n128k16 #[0-9]+ .*still in flight"
  TESTS "a non-default softmax scale")

flashsteps_fault(07d_q_expect_tx_one_block STAGE 07d_overlap
  BREAKS "Q's expect_tx counts one 64-column block of the two at D = 128: q_full completes with half of Q in flight"
  FROM [=[                                           static_cast<std::uint32_t>(Tile::kQBytes));]=]
  TO   [=[                                           static_cast<std::uint32_t>(Tile::kQBlockBytes));]=]
  EXPECT "completed phase 0 .* while 1 TMA load\\(s\\) tracked by it, 16384 bytes, had not landed: the phase's expect_tx announced fewer bytes"
  TESTS "every head dimension the stage supports*")

flashsteps_fault(07d_setmaxnreg_dec_raises STAGE 07d_overlap
  BREAKS "the producer's setmaxnreg.dec asks for 176 registers, more than the 168 the kernel is launched with"
  FROM [=[    ptx::setmaxnreg_dec<Tile::kProducerRegs>();]=]
  TO   [=[    ptx::setmaxnreg_dec<176>();]=]
  EXPECT "setmaxnreg.dec to 176 from 168 registers per thread \\(the kernel's count at launch: .*\\): .inc must not lower the count, .dec must not raise it"
  TESTS "a non-default softmax scale")

flashsteps_fault(07d_setmaxnreg_inc_beyond_pool STAGE 07d_overlap
  BREAKS "the consumers' setmaxnreg.inc asks for 248 registers: the block's pool (what the producer released) cannot give both warpgroups that many"
  FROM [=[  ptx::setmaxnreg_inc<Tile::kConsumerRegs>();]=]
  TO   [=[  ptx::setmaxnreg_inc<248>();]=]
  EXPECT "deadlock: every live thread.*setmaxnreg.inc to 248 from 168 registers per thread .*needs 10240 registers from the block's pool, which holds 8192"
  TESTS "a non-default softmax scale")
