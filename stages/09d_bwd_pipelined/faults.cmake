# stages/09d_bwd_pipelined/faults.cmake — the planted faults of 09d_bwd_pipelined: one
# flashsteps_fault() each (emu/faults/CMakeLists.txt says what each argument means,
# emu/faults/README.md how to run them). Each changes one line of the stage's source; FROM is that
# line with enough of its surroundings to occur exactly once. They sit in what this step changes:
# the ring's wait and where a slot is refilled. The refill needs a walk of more query tiles than
# the ring has slots: the long sums' 4096 rows (the other small cases walk two tiles or fewer).
# 09c's faults stay 09c's: the products, the lanes and barrier (C)'s dS round trip are its lines,
# copied unchanged.

flashsteps_fault(09d_wait_one_group_short STAGE 09d_bwd_pipelined
  BREAKS "the wait at the top of tile i lets kStages groups stay in flight, not kStages - 1: tile i's own group (and at the first tile K_j, V_j's) may still fly, so the products read Q_i, dO_i, K_j, V_j before their cp.async lands — on the emulator, the poison a copy's destination holds until its wait"
  FROM [=[    cuda::pipeline_consumer_wait_prior<Tile::kStages - 1>(pipe);]=]
  TO   [=[    cuda::pipeline_consumer_wait_prior<Tile::kStages>(pipe);]=]
  EXPECT "dQ max err [^|]*non- ?finite[^|]*FAIL . dK max err [^|]*non- ?finite[^|]*FAIL . dV max err [^|]*non- ?finite[^|]*FAIL"
  TESTS "a non-default softmax scale")

flashsteps_fault(09d_refill_before_last_read STAGE 09d_bwd_pipelined
  BREAKS "the refill of slot i % kStages is issued before barrier (C), which ends the slot's last read: a warp that gets there first starts the copy of tile i + kStages into Q_i, dO_i while the other warps still read them for Sᵀ, dPᵀ, dK_j and dV_j"
  FROM [=[    __syncthreads();
    //! [dkdv]
    //! [refill]
    // Tile i + kStages goes into the slot tile i has just left; it flies during this tile's dQ
    // and the next kStages - 1 tiles.
    prefetch(i + Tile::kStages);]=]
  TO   [=[    prefetch(i + Tile::kStages);
    __syncthreads();
    //! [dkdv]
    //! [refill]
    // Tile i + kStages goes into the slot tile i has just left; it flies during this tile's dQ
    // and the next kStages - 1 tiles.]=]
  EXPECT "dK max err [^|]*non- ?finite[^|]*FAIL"
  TESTS "a backward stage sums*")
