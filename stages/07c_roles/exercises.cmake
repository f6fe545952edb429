# stages/07c_roles/exercises.cmake — the exercise of 07c_roles that asks the reader to write the
# step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.

flashsteps_exercise(07c_write_empty_wait STAGE 07c_roles
  TASK "write the producer's wait before it refills stage `j % kStages` with tile j: `wait_parity` on `empty[j % kStages]` for the phase in which both consumers released tile j - kStages, with the parity that lets the first pass over the ring through a fresh barrier (the ring picture above: phase n = j / kStages, and a fresh barrier's phase before phase 0 counts as complete)"
  SOLUTION [=[      wait_parity(&empty[j % kStages], (static_cast<std::uint32_t>(j / kStages) & 1u) ^ 1u, "empty",
                  j % kStages);]=]
  STUB [=[      // the producer refills stage j % kStages at once: write its wait on empty[j % kStages]]=]
  EXPECT "mbarrier.arrive.expect_tx: 1 arrival\\(s\\) in phase 0, which has only 0 of 1 pending: the pending arrival count may not go below 0"
  TESTS "same inputs twice*")
