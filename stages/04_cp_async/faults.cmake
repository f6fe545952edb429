# stages/04_cp_async/faults.cmake — the planted faults of 04_cp_async: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(04_wait_prior_count STAGE 04_cp_async
  BREAKS "cp.async.wait_group waits one group too few: tile j is read while its copies still fly"
  FROM [=[    cuda::pipeline_consumer_wait_prior<kStages - 2>(pipe);]=]
  TO   [=[    cuda::pipeline_consumer_wait_prior<kStages - 1>(pipe);]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(04_missing_barrier_a STAGE 04_cp_async
  BREAKS "barrier (A) is gone: other threads' copies of K_j, V_j are not known to have landed"
  FROM [=[    __syncthreads();
    //! [wait]]=]
  TO   [=[    // (planted fault: barrier (A) is gone)
    //! [wait]]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "a non-default softmax scale")

flashsteps_fault(04_missing_drain STAGE 04_cp_async
  BREAKS "the epilogue no longer drains the pipeline: copies (Q's, when no tile is visited) outlive the thread"
  FROM [=[  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncwarp();]=]
  TO   [=[  // (planted fault: the final wait_group 0 is gone)
  __syncwarp();]=]
  EXPECT "cp.async copies it never waited for" TESTS "Sq != Skv both ways*")

flashsteps_fault(04_missing_tail_zero_fill STAGE 04_cp_async
  BREAKS "rows past the last key are neither copied nor zero-filled"
  FROM [=[      *reinterpret_cast<uint4*>(piece) = make_uint4(0u, 0u, 0u, 0u);]=]
  TO   [=[      // (planted fault: the zero fill is gone)]=]
  EXPECT "[1-9][0-9]* NaN \\(poison or computed\\)" TESTS "every head dimension*")

flashsteps_fault(04_shuffle_mask STAGE 04_cp_async
  BREAKS "the max shuffle's member mask leaves out the upper 16 lanes"
  FROM [=[      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));]=]
  TO   [=[      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFu, tile_max, 1));]=]
  EXPECT "the member mask 0xffff does not include the calling lane" TESTS "a non-default softmax scale")

flashsteps_fault(04_store_over_copy_in_flight STAGE 04_cp_async
  BREAKS "the zero fill runs for every piece, not only past the last row: it stores into bytes its cp.async still has in flight"
  FROM [=[    } else {
      *reinterpret_cast<uint4*>(piece) = make_uint4(0u, 0u, 0u, 0u);]=]
  TO   [=[    } {  // (planted fault: no else: the zero fill also covers the pieces just copied)
      *reinterpret_cast<uint4*>(piece) = make_uint4(0u, 0u, 0u, 0u);]=]
  EXPECT "a store of [0-9]+ bytes at .*fused_attention_kernel.* writes shared memory .* is in the destination of a cp.async of 16 bytes issued at .*by this thread, still in flight" TESTS "a non-default softmax scale")
