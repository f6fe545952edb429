# stages/07a_wgmma/faults.cmake — the planted faults of 07a_wgmma: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(07a_s_wait_group_count STAGE 07a_wgmma
  BREAKS "wgmma.wait_group<1> after S = Q K^T leaves its only group in flight: the mask and softmax write accumulators the wgmma still owns. PTX leaves that undefined: on hardware S may be read before the tensor cores finish it and the masked values overwritten by it, a silent, run-to-run wrong result. The emulator tracks each register of an in-flight wgmma and stops at the first access"
  FROM [=[    // Synchronous: S_ij is complete before anything reads it (nothing overlaps the softmax).
    ptx::wgmma_wait_group<0>();]=]
  TO   [=[    // Synchronous: S_ij is complete before anything reads it (nothing overlaps the softmax).
    ptx::wgmma_wait_group<1>();]=]
  EXPECT "writes register [0-9]+ of its accumulator fragment .* still in flight" TESTS "a non-default softmax scale")

flashsteps_fault(07a_missing_fence_proxy_async STAGE 07a_wgmma
  BREAKS "no fence.proxy.async between the cp.async copies (generic proxy) and the wgmmas that read them (async proxy): on hardware the wgmmas may read shared memory as it was before the copies, a silent race that can pass a test and fail the next run. The emulator records which bytes ordinary stores changed since the last fence and stops at the first such read"
  FROM [=[    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    __syncthreads();]=]
  TO   [=[    // (planted fault: fence.proxy.async is gone)
    __syncthreads();]=]
  EXPECT "wgmma.mma_async \\([AB] operand\\) reads shared memory at 0x[0-9a-f]+ that ordinary stores changed after the last fence.proxy.async" TESTS "a non-default softmax scale")

flashsteps_fault(07a_swizzle_without_xor STAGE 07a_wgmma
  BREAKS "the copies place chunk c of row r at position c, not c ^ (r % 8): the descriptors' 128-byte swizzle reads other chunks"
  FROM [=[  return (c / 8) * kRows * 64 + r * 64 + ((c % 8) ^ (r % 8)) * 8;]=]
  TO   [=[  return (c / 8) * kRows * 64 + r * 64 + (c % 8) * 8;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(07a_v_desc_lbo STAGE 07a_wgmma
  BREAKS "V's descriptor has a leading byte offset of half a column block: at D = 128, O's columns 64..127 read V from the wrong rows"
  FROM [=[        static_cast<std::uint32_t>(Tile::kKVBlockBytes), Tile::kAtomBytes);]=]
  TO   [=[        static_cast<std::uint32_t>(Tile::kKVBlockBytes / 2), Tile::kAtomBytes);]=]
  EXPECT "heads: FAIL" TESTS "every head dimension the stage supports*")

flashsteps_fault(07a_pv_wait_dropped STAGE 07a_wgmma
  BREAKS "no wgmma.wait_group after O += P V: the next tile's barrier no longer tells that the stage is free, and its prefetch overwrites V_j while the wgmma may still read it. On hardware that is a silent race, wrong only when the copy overtakes the tensor cores. The emulator keeps every in-flight wgmma's operand bytes and stops at the copy that writes one"
  FROM [=[    // Synchronous again: O is complete, and P's registers and stage s are free, when this returns.
    ptx::wgmma_wait_group<0>();]=]
  TO   [=[    // Synchronous again: O is complete, and P's registers and stage s are free, when this returns.
    // (planted fault: the wait is gone)]=]
  EXPECT "cp.async.* writes shared memory 0x[0-9a-f]+..0x[0-9a-f]+, of which 0x[0-9a-f]+ is an operand byte that wgmma.mma_async.m64n64k16 #[0-9]+ of warpgroup 0 .* may still read \\(its B operand\\)"
  TESTS "same inputs twice*")
