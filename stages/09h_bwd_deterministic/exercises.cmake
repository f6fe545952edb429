# stages/09h_bwd_deterministic/exercises.cmake — the exercise of 09h_bwd_deterministic that asks
# the reader to write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt
# says what each argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code,
# whole lines that occur once: the release of the next key tile's turn, after the full wait.

flashsteps_exercise(09h_write_the_release STAGE 09h_bwd_deterministic
  TASK "in the deterministic mode, once tile i's partials are issued, hand the tile to the next key tile (j + 1) through its semaphore `turn` (a cuda::atomic_ref<int, thread_scope_device>) — after which wait on the bulk group, and with which memory order, so that the next block's adds come after all of this block's?"
  SOLUTION [=[        cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});  // tile i's adds applied
        turn.store(j + 1, cuda::memory_order_release);]=]
  STUB [=[        // release the next key tile's turn once this block's adds are done]=]
  EXPECT "deadlock between blocks"
  TESTS "emulated schedules: a deterministic launch*")
