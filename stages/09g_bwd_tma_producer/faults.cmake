# stages/09g_bwd_tma_producer/faults.cmake — the planted faults of 09g_bwd_tma_producer: one
# flashsteps_fault() each (emu/faults/CMakeLists.txt says what each argument means,
# emu/faults/README.md how to run them). Each changes or moves one line of the stage's source;
# FROM is that line with enough of its surroundings to occur exactly once. They sit in what this
# step changes: the producer's expect_tx, the math threads' wait on full[s] and their arrive on
# empty[s]. 09f's faults (the dQ writer) stay 09f's.

flashsteps_fault(09g_expect_tx_misses_d_row STAGE 09g_bwd_tma_producer
  BREAKS "the producer's expect_tx counts Q_i, dO_i and LSE_i but not D_i's row of Br floats: full[s] completes while D_i's TMA load is still on its way, and the recompute may read D_i before it lands"
  FROM [=[                                             static_cast<std::uint32_t>(Tile::kSlotTxBytes));]=]
  TO   [=[                                             static_cast<std::uint32_t>(Tile::kSlotTxBytes - Br * 4));]=]
  EXPECT "while 1 TMA load\\(s\\) tracked by it, 256 bytes, had not landed: the phase's expect_tx announced fewer bytes"
  TESTS "a non-default softmax scale")

flashsteps_fault(09g_full_parity STAGE 09g_bwd_tma_producer
  BREAKS "the math threads wait on the wrong parity of full[s], that of the phase before tile i's: on a fresh barrier it counts as complete, so the products may read Q_i before it lands, and once it has landed the wait is for the slot's next phase, which the producer arms only after an empty[s] the math threads never give: a hang"
  FROM [=[                static_cast<std::uint32_t>((i - i_first) / Tile::kStages) & 1u, "full",]=]
  TO   [=[                (static_cast<std::uint32_t>((i - i_first) / Tile::kStages) & 1u) ^ 1u, "full",]=]
  EXPECT "deadlock: every live thread of the block waits .*for the phase of parity 1"
  TESTS "a non-default softmax scale")

flashsteps_fault(09g_empty_before_last_read STAGE 09g_bwd_tma_producer
  BREAKS "each math thread arrives on empty[s] before the wgmma.wait_group that covers its dK/dV products, the last readers of Q_i and dO_i: the producer may then load tile i + 2 into the slot while those wgmmas still read it"
  FROM [=[    ptx::wgmma_commit_group();
    // Synchronous: this thread's reads of slot i % kStages (Q_i, dO_i by wgmma, LSE_i and D_i in
    // the recompute) are over; the producer refills the slot once all 128 have said so.
    ptx::wgmma_wait_group<0>();
    //! [empty_arrive]
    cuda::ptx::mbarrier_arrive(&empty[i % Tile::kStages]);]=]
  TO   [=[    ptx::wgmma_commit_group();
    cuda::ptx::mbarrier_arrive(&empty[i % Tile::kStages]);
    // Synchronous: this thread's reads of slot i % kStages (Q_i, dO_i by wgmma, LSE_i and D_i in
    // the recompute) are over; the producer refills the slot once all 128 have said so.
    ptx::wgmma_wait_group<0>();
    //! [empty_arrive]]=]
  EXPECT "a TMA load \\(cp.async.bulk.tensor\\) issued at .*kernels.cu:[0-9]+.* writes shared memory 0x[0-9a-f]+..0x[0-9a-f]+, of which 0x[0-9a-f]+ is an operand byte that wgmma.mma_async.m64n(64|128)k16 #[0-9]+ of warpgroup 0 .*may still read"
  TESTS "same inputs twice*")
