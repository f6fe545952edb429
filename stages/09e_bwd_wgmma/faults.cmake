# stages/09e_bwd_wgmma/faults.cmake — the planted faults of 09e_bwd_wgmma: one flashsteps_fault()
# each (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run
# them). Each changes one line of the stage's source; FROM is that line with enough of its
# surroundings to occur exactly once. They sit in what this step changes: a descriptor's transpose
# bit, the wait between a wgmma and the reads of its accumulator, and which accumulator becomes
# dSᵀ's register operand. 09d's faults stay 09d's (the ring's wait and refill are its lines).

flashsteps_fault(09e_dq_b_not_transposed STAGE 09e_bwd_wgmma
  BREAKS "dQ's B operand K_j is read K-major (imm-tnsp-b = 0) instead of MN-major: its k (the key) runs down the stored rows, so the wgmma multiplies dS by a wrong arrangement of K_j's elements"
  FROM [=[        wgmma_m64n64k16_ss<T, 1>(regs<32>(dq_acc), desc<false, Br>(sdS, kc),]=]
  TO   [=[        wgmma_m64n64k16_ss<T, 0>(regs<32>(dq_acc), desc<false, Br>(sdS, kc),]=]
  EXPECT "dQ max err [^|]*FAIL"
  TESTS "a non-default softmax scale")

flashsteps_fault(09e_no_wait_before_recompute STAGE 09e_bwd_wgmma
  BREAKS "the wgmma.wait_group after Sᵀ and dPᵀ is gone: the recompute reads their accumulators, and writes Pᵀ and dSᵀ into them in place, while the wgmmas may still be writing them — the emulator names the first store into an accumulator still in flight"
  FROM [=[    ptx::wgmma_wait_group<0>();  // synchronous: Sᵀ and dPᵀ are complete before the recompute]=]
  TO   [=[    // (no wait: the recompute reads the accumulators of wgmmas still in flight)]=]
  EXPECT "writes register [0-9]+ of its accumulator fragment .* of wgmma.mma_async.m64n64k16 .* still in flight"
  TESTS "a non-default softmax scale")

flashsteps_fault(09e_ds_from_wrong_accumulator STAGE 09e_bwd_wgmma
  BREAKS "dK_j's register A operand is packed from the Sᵀ accumulator (now Pᵀ) instead of the dPᵀ one (now dSᵀ): dK_j sums Pᵀ Q_i, while dQ, which reads dS from shared memory, and dV stay right"
  FROM [=[      a_fragment<T>(dsa[kk], dp_acc, kk);]=]
  TO   [=[      a_fragment<T>(dsa[kk], s_acc, kk);]=]
  EXPECT "dQ max err [^|]*ok . dK max err [^|]*FAIL . dV max err [^|]*ok"
  TESTS "a non-default softmax scale")
