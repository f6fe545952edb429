# stages/08b_persistent/faults.cmake — the planted faults of 08b_persistent: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

# The persistent loop's own (stage 08b): the schedule, the Q region shared by consecutive items,
# the ring that runs on across items. The tile body is 08a's, whose planted faults test it: they
# are not repeated here.
flashsteps_fault(08b_next_item_stride STAGE 08b_persistent
  BREAKS "the next work item is computed with G + 1 for G: the static walk strides past an item every round, the dynamic one skips item G: items are dropped"
  FROM [=[        item = next_item(tile_counter != nullptr ? Schedule::kDynamic : Schedule::kStatic, item, G,
                         fetched);]=]
  TO   [=[        item = next_item(tile_counter != nullptr ? Schedule::kDynamic : Schedule::kStatic, item, G + 1,
                         fetched);]=]
  EXPECT "heads: FAIL" TESTS "a grid that fills the GPU*")

flashsteps_fault(08b_dynamic_fetch_off_by_one STAGE 08b_persistent
  BREAKS "the dynamic schedule adds one to the counter's old value: item G is never taken (the causal cases run the dynamic schedule)"
  FROM [=[        item = next_item(tile_counter != nullptr ? Schedule::kDynamic : Schedule::kStatic, item, G,
                         fetched);]=]
  TO   [=[        item = next_item(tile_counter != nullptr ? Schedule::kDynamic : Schedule::kStatic, item, G,
                         fetched + 1);]=]
  EXPECT "heads: FAIL" TESTS "a grid that fills the GPU*")

flashsteps_fault(08b_no_q_empty_wait STAGE 08b_persistent
  BREAKS "the producer issues the next item's Q without waiting on q_empty: it re-arms q_full before the consumers have waited for the last item's Q (and the load would overwrite O's staging)"
  FROM [=[        wait_parity(q_empty, (static_cast<std::uint32_t>(k) & 1u) ^ 1u, "q_empty", 0);]=]
  TO   [=[        // (planted fault: the wait for the last item's store to read the Q region is gone)]=]
  EXPECT "mbarrier.arrive.expect_tx: 1 arrival\\(s\\) in phase 0, which has only 0 of 1 pending" TESTS "a grid that fills the GPU*")

flashsteps_fault(08b_q_released_before_store_read STAGE 08b_persistent
  BREAKS "each consumer releases the Q region (q_empty) before its O is staged and its TMA store has read it: the next item's Q load overwrites O in shared memory. On hardware a silent race, wrong only when the load overtakes the store. On the emulator O comes out non-finite while every LSE row is right (the item ran, its output was lost)"
  FROM [=[      cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
      ptx::named_barrier_sync(kBarStore + cw, Tile::kWarpgroupThreads);
      // (64, 64) boxes at (col, row, head); rows >= Sq lie outside the tensor and are not written.
      // A consumer whose 64 rows all lie past Sq stores nothing (no box entirely out of bounds).
      if (tid == 0 && row0 + cw * kRows < sh.sq) {
#pragma unroll
        for (int c = 0; c < kColBlocks; ++c) {
          const std::int32_t coords[3] = {c * kBlockCols, row0 + cw * kRows, bh};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, &tm_o,
                                          coords, sO + c * Tile::kQBlockBytes);
        }
        cuda::ptx::cp_async_bulk_commit_group();
        // Shared memory must stay valid until the engine has read it: wait before the Q region is
        // released to the next item (q_empty, below).
        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
      }
      //! [epilogue]
      //! [release_q]
      // Item k's O has left the Q region (this consumer's TMA store has read it; the other 127
      // threads staged their part before the store barrier): item k+1's Q may be loaded there.
      if (tid == 0) cuda::ptx::mbarrier_arrive(q_empty);]=]
  TO   [=[      if (tid == 0) cuda::ptx::mbarrier_arrive(q_empty);
      cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
      ptx::named_barrier_sync(kBarStore + cw, Tile::kWarpgroupThreads);
      // (64, 64) boxes at (col, row, head); rows >= Sq lie outside the tensor and are not written.
      // A consumer whose 64 rows all lie past Sq stores nothing (no box entirely out of bounds).
      if (tid == 0 && row0 + cw * kRows < sh.sq) {
#pragma unroll
        for (int c = 0; c < kColBlocks; ++c) {
          const std::int32_t coords[3] = {c * kBlockCols, row0 + cw * kRows, bh};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, &tm_o,
                                          coords, sO + c * Tile::kQBlockBytes);
        }
        cuda::ptx::cp_async_bulk_commit_group();
        // Shared memory must stay valid until the engine has read it: wait before the Q region is
        // released to the next item (q_empty, below).
        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
      }
      //! [epilogue]
      //! [release_q]
      // Item k's O has left the Q region (this consumer's TMA store has read it; the other 127
      // threads staged their part before the store barrier): item k+1's Q may be loaded there.]=]
  EXPECT "[0-9]+ non-finite outputs \\(unwritten or NaN\\), worst at" TESTS "a grid that fills the GPU*")

flashsteps_fault(08b_last_stage_not_released STAGE 08b_persistent
  BREAKS "the stage of an item's last tile is never released (as 08a could: its block ended there): the ring runs on into the next item and the producer waits on empty[s] forever"
  FROM [=[        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{Tc_i-1}, V_{Tc_i-1} may be overwritten]=]
  TO   [=[        (void)sp;  // (planted fault: the release of the item's last stage is gone)]=]
  EXPECT "deadlock: every live thread.*waits on the mbarrier .* 256 of 256 arrivals pending" TESTS "a grid that fills the GPU*")
