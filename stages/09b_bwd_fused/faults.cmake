# stages/09b_bwd_fused/faults.cmake — the planted faults of 09b_bwd_fused: one flashsteps_fault()
# each (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run
# them). Each changes one line of the stage's source; FROM is that line with enough of its
# surroundings to occur exactly once.

flashsteps_fault(09b_dq_plain_add STAGE 09b_bwd_fused
  BREAKS "dQ's share is added with a plain += instead of atomicAdd: blocks of other K/V tiles add to the same elements at the same time and updates are lost. On hardware dQ is wrong only where two blocks' read-add-write overlap, by different amounts from run to run, and may pass a small test. The emulator records which block touched each global word and stops at the race"
  FROM [=[      atomicAdd(&dq_head[(row0 + r) * D + d], acc * sh.scale);]=]
  TO   [=[      dq_head[(row0 + r) * D + d] += acc * sh.scale;]=]
  EXPECT "a race between blocks: a (load|store) of 4 bytes at .*fused_backward_kernel.* global memory .* that block \\([0-9]+, 0, 0\\) of the same launch (wrote|read and wrote)"
  TESTS "a non-default softmax scale")

flashsteps_fault(09b_causal_tile_skipped STAGE 09b_bwd_fused
  BREAKS "the causal walk starts one query tile late: the diagonal tile, whose rows see the first keys of K_j, is skipped"
  FROM [=[  return first_row <= 0 ? 0 : static_cast<int>(first_row / kBr);]=]
  TO   [=[  return first_row <= 0 ? 1 : static_cast<int>(first_row / kBr) + 1;]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* FAIL . dV max err [^|]* FAIL . on .* heads: FAIL"
  TESTS "a non-default softmax scale")

flashsteps_fault(09b_p_without_lse STAGE 09b_bwd_fused
  BREAKS "P is recomputed as exp(S) without subtracting the row's LSE: it is not the forward's softmax, and every gradient is wrong"
  FROM [=[        p = expf(s * sh.scale - sLse[r]);  // a row that sees a key has a finite LSE]=]
  TO   [=[        p = expf(s * sh.scale);  // a row that sees a key has a finite LSE]=]
  EXPECT "dV max err [^|]* FAIL . on .* heads: FAIL"
  TESTS "a non-default softmax scale")
