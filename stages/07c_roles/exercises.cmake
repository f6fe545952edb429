# stages/07c_roles/exercises.cmake — the exercise of 07c_roles that asks the reader to write the
# step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.
# One of Part II's larger exercises: the ring's whole protocol, in four regions, the producer's
# loop and the consumers' two waits and their release (each wait alone would be a copy of the
# others with the parity changed).

flashsteps_exercise(07c_write_ring STAGE 07c_roles
  TASK "write the ring between the producer and the consumers, with `wait_parity(bar, parity, name, stage)` and `cuda::ptx::mbarrier_arrive`. First region, the producer (thread 0 of warpgroup 0): for each tile j < Tc_i, wait until both consumers have released tile j - kStages's stage, `empty[j % kStages]` (phase n = j / kStages, and the first pass over the ring goes through fresh barriers: a fresh barrier's phase before phase 0 counts as complete), then `prefetch(j)`. Second and third, each consumer thread waits for the phase of `k_full[s]` in which K_j lands before S, and of `v_full[s]` in which V_j lands before P V. Fourth, once its wgmmas of tile j have read stage s, each consumer thread releases it (`empty[s]` counts all 256 consumer threads). The ring picture above says which phase is which"
  SOLUTION [=[    for (int j = 0; j < Tc_i && threadIdx.x == 0; ++j) {
      wait_parity(&empty[j % kStages], (static_cast<std::uint32_t>(j / kStages) & 1u) ^ 1u, "empty",
                  j % kStages);
      prefetch(j);
    }
...
    wait_parity(&k_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "k_full", s);
...
    wait_parity(&v_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "v_full", s);
...
    cuda::ptx::mbarrier_arrive(&empty[s]);  // K_j, V_j may be overwritten]=]
  STUB [=[    (void)prefetch;  // the producer copies nothing: write its loop over the tiles
...
    // S reads stage s at once: write the wait for K_j
...
    // P V reads stage s at once: write the wait for V_j
...
    // stage s is never released: write the release]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")
