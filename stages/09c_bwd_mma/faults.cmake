# stages/09c_bwd_mma/faults.cmake — the planted faults of 09c_bwd_mma: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. They sit in what this step changes: which operand is read transposed,
# where the lanes point, and the barrier the dS round trip needs.

flashsteps_fault(09c_q_without_trans STAGE 09c_bwd_mma
  BREAKS "Q_i, the B operand of dK_j += dSᵀ Q_i, is read by ldmatrix without .trans: each lane gets two neighbours along d, not along the query, and dK alone goes wrong"
  FROM [=[        ptx::ldmatrix_x4_trans(qb, sQ_bt + 16u * kk * kRow + 32u * dp);]=]
  TO   [=[        ptx::ldmatrix_x4(qb, sQ_bt + 16u * kk * kRow + 32u * dp);]=]
  EXPECT "dQ max err [^|]* ok . dK max err [^|]* FAIL . dV max err [^|]* ok"
  TESTS "a non-default softmax scale")

flashsteps_fault(09c_ds_lanes_as_a STAGE 09c_bwd_mma
  BREAKS "dQ's A operand is read from dSᵀ with the lane offsets of a stored A (rows of 16 keys, not 8 keys by two query halves): the fragment holds the wrong keys and queries, and dQ alone goes wrong"
  FROM [=[        const T* ds_lane = sdSt + 16 * kc * kLdDs + qr0 + lane_b(lane, kLdDs);  // keys = k: rows]=]
  TO   [=[        const T* ds_lane = sdSt + 16 * kc * kLdDs + qr0 + lane_a(lane, kLdDs);  // keys = k: rows]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* ok . dV max err [^|]* ok"
  TESTS "a non-default softmax scale")

flashsteps_fault(09c_ds_barrier_missing STAGE 09c_bwd_mma
  BREAKS "barrier (C) is gone: a warp reads the other warps' dSᵀ strips for dQ before they have stored them, and gets the emulator's poisoned shared memory (NaN) — dQ alone goes wrong"
  FROM [=[    // (C) Every warp's dSᵀ strip is in shared memory before any warp reads dS across the strips.
    __syncthreads();]=]
  TO   [=[    // (C) Every warp's dSᵀ strip is in shared memory before any warp reads dS across the strips.
    // (planted fault: barrier (C) is gone)]=]
  EXPECT "dQ max err [^|]*non- ?finite[^|]*FAIL . dK max err [^|]* ok . dV max err [^|]* ok"
  TESTS "a non-default softmax scale")
