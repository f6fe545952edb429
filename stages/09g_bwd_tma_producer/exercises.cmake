# stages/09g_bwd_tma_producer/exercises.cmake — the exercise of 09g_bwd_tma_producer that asks the
# reader to write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says
# what each argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole
# lines that occur once: the producer's step for query tile i.

flashsteps_exercise(09g_write_the_producer STAGE 09g_bwd_tma_producer
  TASK "write the producer's step for query tile i into slot s = i % kStages: wait until the math threads have left the slot (empty[s], the parity of use n = (i - i_first) / kStages, and what a fresh barrier answers), arm full[s] with the slot's bytes (cuda::ptx::mbarrier_arrive_expect_tx, Tile::kSlotTxBytes), then load Q_i and dO_i (one (64, 64) box per column block c at {64 c, i Br, bh}) and LSE_i, D_i (one (64, 1) box at {i Br, bh}) with cuda::ptx::cp_async_bulk_tensor onto full[s]"
  SOLUTION [=[        wait_parity(&empty[s], (n & 1u) ^ 1u, "empty", s);
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, &full[s],
                                             static_cast<std::uint32_t>(Tile::kSlotTxBytes));
        for (int c = 0; c < D / 64; ++c) {
          const std::int32_t at[3] = {64 * c, i * Br, static_cast<std::int32_t>(bh)};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          slot(i) + Tile::kOffQ + c * Br * 128, &tm_q, at,
                                          &full[s]);
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          slot(i) + Tile::kOffDO + c * Br * 128, &tm_do, at,
                                          &full[s]);
        }
        const std::int32_t row[2] = {i * Br, static_cast<std::int32_t>(bh)};
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                        slot(i) + Tile::kOffLse, &tm_lse, row, &full[s]);
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                        slot(i) + Tile::kOffDelta, &tm_dsum, row, &full[s]);]=]
  STUB [=[        (void)n, (void)s;  // wait for the slot, arm full[s], load Q_i, dO_i, LSE_i, D_i]=]
  EXPECT "deadlock: every live thread of the block waits"
  TESTS "a non-default softmax scale")
