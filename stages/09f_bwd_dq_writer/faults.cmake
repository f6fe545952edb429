# stages/09f_bwd_dq_writer/faults.cmake — the planted faults of 09f_bwd_dq_writer: one
# flashsteps_fault() each (emu/faults/CMakeLists.txt says what each argument means,
# emu/faults/README.md how to run them). Each changes one line of the stage's source; FROM is that
# line with enough of its surroundings to occur exactly once. They sit in what this step changes:
# the writer's wait before it hands a buffer back, the proxy fence between the math warpgroup's
# stores and the reduce-add, and the order the accumulator's tiles hold a partial in. 09e's
# faults stay 09e's (the products and the recompute are its lines).

flashsteps_fault(09f_dq_buffer_reused_early STAGE 09f_bwd_dq_writer
  BREAKS "the writer hands buffer b back (dq_empty) without cp.async.bulk.wait_group.read: the reduce-add may not have read it yet when the math warpgroup stores the partial two steps later into it — the emulator names that store and the reduce whose source it overwrites"
  FROM [=[        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});  // buffer b is read]=]
  TO   [=[        // (no wait: buffer b goes back before its reduce-add has read it)]=]
  EXPECT "is in the source of .*not read yet: no cp.async.bulk.wait_group.read covers"
  TESTS "a backward stage sums*")

flashsteps_fault(09f_no_proxy_fence_before_reduce STAGE 09f_bwd_dq_writer
  BREAKS "the fence.proxy.async after the partial's stores is gone: the reduce-add reads shared memory through the async proxy, which is not guaranteed to see ordinary stores made after the last fence"
  FROM [=[      cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the stores, before the reduce]=]
  TO   [=[      // (no fence: the async proxy may not see the stores)]=]
  EXPECT "cp.reduce.async.bulk .source. reads shared memory at .* that ordinary stores changed after the last fence.proxy.async"
  TESTS "a non-default softmax scale")

flashsteps_fault(09f_dq_layout_transposed STAGE 09f_bwd_dq_writer
  BREAKS "dq_offset() puts an element's register index e the other way round (its column parity as the high bit, its row half as the low one): the preprocess and the conversion read the tile in an order other than the one the math threads store their registers in, so dQ is permuted, while dK and dV stay right"
  FROM [=[  const int w = r / 16, g = r % 8, e = r % 16 / 8 * 2 + c % 2;  // warp, groupID, register]=]
  TO   [=[  const int w = r / 16, g = r % 8, e = r % 16 / 8 + c % 2 * 2;  // warp, groupID, register]=]
  EXPECT "dQ max err [^|]*FAIL . dK max err [^|]*ok . dV max err [^|]*ok"
  TESTS "a non-default softmax scale")
