# stages/07b_tma/exercises.cmake — the exercise of 07b_tma that asks the reader to write the step's
# lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument means;
# tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once. The
# three arms are cut together (three regions): with one left in place, the others are copies of it
# with the barrier and the traits' name changed.

flashsteps_exercise(07b_write_expect_tx_arms STAGE 07b_tma
  TASK "write thread 0's three arms, each before the TMA copies it announces: of `k_full[s]` and `v_full[s]` for tile `t_next` in the prefetch, and of `q_full` for Q_i below it, one `cuda::ptx::mbarrier_arrive_expect_tx` each (release, CTA scope, shared space) that arrives once (each barrier's count is 1) and announces the bytes TMA will deliver to that barrier's buffer: all D/64 boxes, zero-filled rows included (the `Tile` traits name them)"
  SOLUTION [=[      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, &k_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBytes));
...
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, &v_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBytes));
...
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                         cuda::ptx::space_shared, q_full,
                                         static_cast<std::uint32_t>(Tile::kQBytes));]=]
  STUB [=[      // arm k_full[s] for K_j's copies below
...
      // arm v_full[s] for V_j's copies below
...
    // arm q_full for Q_i's copies below]=]
  EXPECT "deadlock: every live thread.*for the phase of parity 0: phase 0 \\(parity 0\\), 1 of 1 arrivals pending, tx-count -[0-9]+"
  TESTS "a non-default softmax scale")
