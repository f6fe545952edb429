# stages/09f_bwd_dq_writer/exercises.cmake — the exercise of 09f_bwd_dq_writer that asks the
# reader to write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says
# what each argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole
# lines that occur once: the dQ writer's step — wait for a partial, add it into global memory with
# the bulk reduce-add, and hand its buffer back only once the reduce has read it.

flashsteps_exercise(09f_write_the_dq_writer STAGE 09f_bwd_dq_writer
  TASK "write the dQ writer's step for partial u in buffer b: wait for dq_full[b]'s phase u / kDqBufs (`wait_parity(bar, parity, name, slot)`), add the Br x 64 fp32 partial at `sdQ + b * Br * 64` into `tile + h * Br * 64` with cuda::ptx::cp_reduce_async_bulk (space_global, space_shared, op_add, dst, src, bytes: Tile::kDqBufBytes), close its bulk group, and arrive on dq_empty[b] — after which wait, so that the math warpgroup may overwrite the buffer?"
  SOLUTION [=[        wait_parity(&dq_full[b], static_cast<std::uint32_t>(u / Tile::kDqBufs) & 1u, "dq_full", b);
        cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                        cuda::ptx::op_add, tile + h * Br * 64, sdQ + b * Br * 64,
                                        static_cast<std::uint32_t>(Tile::kDqBufBytes));
        cuda::ptx::cp_async_bulk_commit_group();
        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});  // buffer b is read
        cuda::ptx::mbarrier_arrive(&dq_empty[b]);]=]
  STUB [=[        // write the writer's step for partial u: wait, reduce-add, commit, wait, arrive]=]
  EXPECT "dQ max err [^|]*FAIL"
  TESTS "a non-default softmax scale")
