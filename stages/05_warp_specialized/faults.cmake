# stages/05_warp_specialized/faults.cmake — the planted faults of 05_warp_specialized: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(05_consumer_parity STAGE 05_warp_specialized
  BREAKS "consumers wait on the wrong parity of full[s]: the fresh barrier's previous phase passes at once"
  FROM [=[    wait_phase(full[stage], (j / kStages) & 1, "full", stage);]=]
  TO   [=[    wait_phase(full[stage], ((j / kStages) & 1) ^ 1, "full", stage);]=]
  EXPECT "deadlock: every live thread of the block waits" TESTS "a non-default softmax scale")

flashsteps_fault(05_producer_parity STAGE 05_warp_specialized
  BREAKS "the producer waits on the wrong parity of empty[s]: it refills a stage the consumers still read"
  FROM [=[      if (j >= kStages) wait_phase(empty[s], (j / kStages - 1) & 1, "empty", s);]=]
  TO   [=[      if (j >= kStages) wait_phase(empty[s], (j / kStages) & 1, "empty", s);]=]
  EXPECT "arrive-on in phase 1 before any test_wait|a cp.async issued at .* writes shared memory .* is in the destination of a cp.async .* still in flight" TESTS "a non-default softmax scale")

flashsteps_fault(05_dropped_release STAGE 05_warp_specialized
  BREAKS "consumers never arrive on empty[s]: the producer waits for a release that never comes"
  FROM [=[    (void)empty[stage].arrive();]=]
  TO   [=[    // (planted fault: the release of the stage is gone)]=]
  EXPECT "deadlock: every live thread.* 128 of 128 arrivals pending" TESTS "a non-default softmax scale")

flashsteps_fault(05_missing_zero_fill STAGE 05_warp_specialized
  BREAKS "rows past the last key are no longer zero-filled by cp.async (src-size 0)"
  FROM [=[      __pipeline_memcpy_async(piece, src, 16, /*zfill=*/16);]=]
  TO   [=[      // (planted fault: the zero fill is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "every head dimension*")
