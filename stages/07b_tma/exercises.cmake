# stages/07b_tma/exercises.cmake — the exercise of 07b_tma that asks the reader to write the step's
# lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument means;
# tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.

flashsteps_exercise(07b_write_k_full_arm STAGE 07b_tma
  TASK "write thread 0's arm of `k_full[s]` for tile `t_next`, before the copies of K_j below: one `cuda::ptx::mbarrier_arrive_expect_tx` (release, CTA scope, shared space) that arrives once (the barrier's count is 1) and announces the bytes TMA will deliver to stage s, all D/64 boxes of (Bc, 64) keys, zero-filled rows included (the `Tile` traits name it, and V's arm below is the same for `v_full[s]`)"
  SOLUTION [=[      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, &k_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBytes));]=]
  STUB [=[      // k_full[s] is never armed: write thread 0's arrive.expect_tx]=]
  EXPECT "deadlock: every live thread.*for the phase of parity 0: phase 0 \\(parity 0\\), 1 of 1 arrivals pending, tx-count -16384"
  TESTS "a non-default softmax scale")
