# stages/09c_bwd_mma/exercises.cmake — the exercise of 09c_bwd_mma that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once. Part IV's larger exercise: every operand the step reads transposed, in two regions,
# dK_j and dV_j's B fragments (both loads: with Q_i's left in place, dO_i's would be a copy) and
# dQ_i's k-step, whose A fragment of dS is read from dSᵀ.

flashsteps_exercise(09c_write_trans_reads STAGE 09c_bwd_mma
  TASK "write the operands this step reads transposed, with the ldmatrix form that hands each fragment what it needs. First region, dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i at k-step kk: load `ob` and `qb`, the B fragments of n8 tiles 2dp and 2dp+1 (dO_i and Q_i are stored (query, d) row-major, `kRow` bytes a row, and the query is these products' k: `sdO_bt`, `sQ_bt` are this lane's addresses at kk = dp = 0). Second region, dQ_i's k-step kc (keys 16kc..16kc+15): this warp's A fragment of dS, queries qr0..qr0+15, read from dSᵀ (`sdSt`, (Bc, Br), rows `kLdDs` elements apart), then for each dp < `Tile::kDqN / 2` the B fragments of K_j (`sK`, rows `kLd` elements apart) at columns dc0 + 16dp .. +15 and the two `ptx::mma_m16n8k16<T>` into `dq_acc[2 * dp]` and `dq_acc[2 * dp + 1]` (`lane_a` and `lane_b` above give a lane's row offsets for the two ldmatrix.x4 matrix orders)"
  SOLUTION [=[        ptx::ldmatrix_x4_trans(ob, sdO_bt + 16u * kk * kRow + 32u * dp);
        ptx::ldmatrix_x4_trans(qb, sQ_bt + 16u * kk * kRow + 32u * dp);
...
        std::uint32_t dsa[4];  // (16 queries, 16 keys) of dS: A, read from dSᵀ with .trans
        const T* ds_lane = sdSt + 16 * kc * kLdDs + qr0 + lane_b(lane, kLdDs);  // keys = k: rows
        ptx::ldmatrix_x4_trans(dsa, ptx::smem_addr(ds_lane));
#pragma unroll
        for (int dp = 0; dp < Tile::kDqN / 2; ++dp) {
          std::uint32_t kb[4];  // (16 keys, 16 d) of K_j: B of tiles 2dp, 2dp+1
          ptx::ldmatrix_x4_trans(
              kb, ptx::smem_addr(sK + 16 * kc * kLd + dc0 + 16 * dp + lane_a(lane, kLd)));
          ptx::mma_m16n8k16<T>(dq_acc[2 * dp], dsa, {kb[0], kb[1]});
          ptx::mma_m16n8k16<T>(dq_acc[2 * dp + 1], dsa, {kb[2], kb[3]});
        }]=]
  STUB [=[        (void)sdO_bt, ob[0] = ob[1] = ob[2] = ob[3] = 0u;  // write the loads of dO_i's
        (void)sQ_bt, qb[0] = qb[1] = qb[2] = qb[3] = 0u;    // and Q_i's B fragments
...
        // dq_acc gets nothing from this k-step: write its fragments and products]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* FAIL . dV max err [^|]* FAIL"
  TESTS "a non-default softmax scale")
