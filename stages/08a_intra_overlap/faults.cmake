# stages/08a_intra_overlap/faults.cmake — the planted faults of 08a_intra_overlap: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.
# The faults of the code this step leaves as 07d_overlap has it (descriptors, the producer's
# barriers, setmaxnreg, the epilogue) are 07d's (stages/07d_overlap/faults.cmake); these are the
# ones in the tile body this step reorders, and the lesson's own.

flashsteps_fault(08a_missing_wgmma_fence STAGE 08a_intra_overlap
  BREAKS "no wgmma.fence before S = Q K^T"
  FROM [=[      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Tile::kQK; ++kk)]=]
  TO   [=[      // (planted fault: wgmma.fence is gone)
#pragma unroll
      for (int kk = 0; kk < Tile::kQK; ++kk)]=]
  EXPECT "wgmma.mma_async without a wgmma.fence" TESTS "a non-default softmax scale")

flashsteps_fault(08a_wait_group_count STAGE 08a_intra_overlap
  BREAKS "wgmma.wait_group leaves S_j in flight: the softmax reads accumulators not yet written. PTX leaves that undefined: on hardware a silent race, wrong from run to run. The emulator tracks each register of an in-flight wgmma and stops at the first access"
  FROM [=[      ptx::wgmma_wait_group<kFirst ? 0 : 1>();]=]
  TO   [=[      ptx::wgmma_wait_group<kFirst ? 1 : 2>();]=]
  EXPECT "writes register [0-9]+ of its accumulator fragment .* still in flight" TESTS "a non-default softmax scale")

# Asynchronous lifetimes (issue 20): each passes on the emulator of 1d36caf, which ran a wgmma, a
# TMA load and setmaxnreg as instants
flashsteps_fault(08a_empty_arrive_before_pv_wait STAGE 08a_intra_overlap
  BREAKS "consumers release stage j-1 before the wgmma.wait_group that covers P_{j-1} V_{j-1}: the producer's TMA overwrites V while the wgmma may still read it. On hardware a silent race, wrong only when the copy overtakes the tensor cores. The emulator keeps every in-flight wgmma's operand bytes and stops at the copy that writes one"
  FROM [=[      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o_acc);
      ptx::wgmma_fence_operand(p_frag);
      if constexpr (!kFirst) {
        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten
      }]=]
  TO   [=[      ptx::wgmma_fence_operand(o_acc);
      ptx::wgmma_fence_operand(p_frag);
      if constexpr (!kFirst) {
        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten
      }
      ptx::wgmma_wait_group<0>();]=]
  EXPECT "a TMA load \\(cp.async.bulk.tensor\\) issued at .*kernels.cu:[0-9]+.* writes shared memory 0x[0-9a-f]+..0x[0-9a-f]+, of which 0x[0-9a-f]+ is an operand byte that wgmma.mma_async.m64n64k16 #[0-9]+ of warpgroup [12] \\(issued at .*kernels.cu:[0-9]+\\)\\) may still read \\(its B operand\\)"
  TESTS "same inputs twice*")

flashsteps_fault(08a_s_reset_in_flight STAGE 08a_intra_overlap
  BREAKS "S is reset to -inf right after its wgmmas are issued: the reset writes accumulators the wgmma is still writing. PTX leaves that undefined: on hardware a silent race between the two writes. The emulator stops at the first access to an in-flight accumulator"
  FROM [=[        ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
      ptx::wgmma_commit_group();]=]
  TO   [=[        ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
      ptx::wgmma_commit_group(); for (float& x : s_acc) x = -INFINITY;  // (planted: S reset in flight)]=]
  EXPECT "a store of [0-9]+ bytes at .*kernels.cu:[0-9]+.* writes register 0 of its accumulator fragment \\(64 fp32 registers: d\\[0..63\\]\\) of wgmma.mma_async.m64n128k16 #[0-9]+ .*still in flight"
  TESTS "a non-default softmax scale")

# The lesson's own: the order of the tile body, which the SASS test (sass.overlap.*) checks in
# the compiled code, and which these break in the source.
flashsteps_fault(08a_stage_release_after_s_wait STAGE 08a_intra_overlap
  BREAKS "stage j-1 is released after the wait for S_j (FlashAttention-3's point for K alone), but the stage also holds V_{j-1}, which P_{j-1} V_{j-1} may still read. On hardware a silent race, wrong only when the producer's copy overtakes the tensor cores. The emulator keeps every in-flight wgmma's operand bytes and stops at the copy that writes one"
  FROM [=[      ptx::wgmma_wait_group<kFirst ? 0 : 1>();
      ptx::wgmma_fence_operand(s_acc);]=]
  TO   [=[      ptx::wgmma_wait_group<kFirst ? 0 : 1>(); if constexpr (!kFirst) cuda::ptx::mbarrier_arrive(&empty[sp]);
      ptx::wgmma_fence_operand(s_acc);]=]
  EXPECT "a TMA load \\(cp.async.bulk.tensor\\) issued at .*kernels.cu:[0-9]+.* writes shared memory 0x[0-9a-f]+..0x[0-9a-f]+, of which 0x[0-9a-f]+ is an operand byte that wgmma.mma_async.m64n(64|128)k16 #[0-9]+ of warpgroup [12] \\(issued at .*kernels.cu:[0-9]+\\)\\) may still read \\(its B operand\\)"
  TESTS "same inputs twice*")

flashsteps_fault(08a_pv_wait_count STAGE 08a_intra_overlap
  BREAKS "the wait after the softmax leaves P_{j-1} V_{j-1} in flight (wait_group 1): packing P_j overwrites the A registers that product still reads. PTX leaves that undefined: on hardware a silent race. The emulator stops at the first write to an in-flight operand register"
  FROM [=[      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o_acc);
      ptx::wgmma_fence_operand(p_frag);
      if constexpr (!kFirst)]=]
  TO   [=[      ptx::wgmma_wait_group<1>();
      ptx::wgmma_fence_operand(o_acc);
      ptx::wgmma_fence_operand(p_frag);
      if constexpr (!kFirst)]=]
  EXPECT "writes register [0-9]+ of its A-operand fragment .* still in flight"
  TESTS "a non-default softmax scale")

flashsteps_fault(08a_rescale_after_issue STAGE 08a_intra_overlap
  BREAKS "O is rescaled after P_{j-1} V_{j-1} is issued, not before: the multiply writes O while the wgmma accumulates into it. PTX leaves that undefined: on hardware a silent race, wrong from run to run. The emulator stops at the first access to an in-flight accumulator"
  FROM [=[        rescale_o();  // O = alpha_{j-1} O: the previous tile's factor, before P_{j-1} V_{j-1} adds
        // P and O are loop-carried: ptxas may have moved them between registers since the fence
        // above (it injects a fence of its own if not, C7519). A fence does not wait for S_j.
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Tile::kPV; ++kk) {  // O += P_{j-1} V_{j-1}: Bc/16 x m64n{D}k16
          if constexpr (D == 64) {
            ptx::wgmma_m64n64k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
          } else {
            ptx::wgmma_m64n128k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
          }
        }
        ptx::wgmma_commit_group();]=]
  TO   [=[        // P and O are loop-carried: ptxas may have moved them between registers since the fence
        // above (it injects a fence of its own if not, C7519). A fence does not wait for S_j.
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Tile::kPV; ++kk) {  // O += P_{j-1} V_{j-1}: Bc/16 x m64n{D}k16
          if constexpr (D == 64) {
            ptx::wgmma_m64n64k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
          } else {
            ptx::wgmma_m64n128k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
          }
        }
        ptx::wgmma_commit_group();
        rescale_o();  // O = alpha_{j-1} O: the previous tile's factor, before P_{j-1} V_{j-1} adds]=]
  EXPECT "writes register [0-9]+ of its accumulator fragment .* still in flight"
  TESTS "a non-default softmax scale")

flashsteps_fault(08a_last_rescale_dropped STAGE 08a_intra_overlap
  BREAKS "the last tile's P V is added to an O that never took the last tile's alpha"
  FROM [=[      rescale_o();
      ptx::wgmma_fence();]=]
  TO   [=[      // (planted fault: the last rescale is gone)
      ptx::wgmma_fence();]=]
  EXPECT "heads: FAIL"
  TESTS "a non-default softmax scale")
