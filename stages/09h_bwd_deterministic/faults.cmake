# stages/09h_bwd_deterministic/faults.cmake — the planted faults of 09h_bwd_deterministic: one
# flashsteps_fault() each (emu/faults/CMakeLists.txt says what each argument means,
# emu/faults/README.md how to run them). They sit in what this step adds: the wait before the
# release, the turn a block waits for, and the clearing of the semaphores. 09g's and 09f's faults
# stay theirs.
# Each runs the suite's hidden [seeds] case of the mode (the launch asks for it there).

flashsteps_fault(09h_release_after_read_wait STAGE 09h_bwd_deterministic
  BREAKS "the writer releases the next key tile's turn after cp.async.bulk.wait_group.read, which says only that the partial was read: its adds may still be on their way, so the next block's adds can land first (issue 42, flash-attention issue #2244): on the emulator each block's adds land at its exit, in whatever order the schedule ends the blocks, and dQ's bits change with the seed"
  FROM [=[        cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});  // tile i's adds applied]=]
  TO   [=[        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});  // (only read)]=]
  EXPECT "schedule seed [0-9]+ against seed 1.*same_bits\\(runs\\[s\\]\\.dq, runs\\[0\\]\\.dq\\)"
  TESTS "emulated schedules: a deterministic launch*")

flashsteps_fault(09h_turn_counted_from_first_tile STAGE 09h_bwd_deterministic
  BREAKS "a block's turn counted from its own first query tile (j - i_first, as if each tile's first contributor had turn 0): with the causal mask key tile j > 0 starts at tile i_first > 0 with turn 0 there, beside key tile 0: two blocks take turn 0, one release is lost and a later block waits for a turn that never comes"
  FROM [=[        while (turn.load(cuda::memory_order_acquire) != j) {]=]
  TO   [=[        while (turn.load(cuda::memory_order_acquire) != j - i_first) {]=]
  EXPECT "deadlock between blocks"
  TESTS "emulated schedules: a deterministic launch*")

flashsteps_fault(09h_semaphore_not_cleared STAGE 09h_bwd_deterministic
  BREAKS "the preprocess no longer clears the semaphores: each launch finds what the workspace held (poison, or the last launch's counts): key tile 0 waits for a turn of 0 that never comes"
  FROM [=[  if (r % kBr == 0) dq_sem[row / kBr] = 0;  // tile (bh, r / kBr): key tile 0's turn]=]
  TO   [=[  // (the semaphores keep what the workspace held)]=]
  EXPECT "deadlock between blocks"
  TESTS "emulated schedules: a deterministic launch*")
