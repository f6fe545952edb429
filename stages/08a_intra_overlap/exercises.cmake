# stages/08a_intra_overlap/exercises.cmake — the exercise of 08a_intra_overlap that asks the reader
# to write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what
# each argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines
# that occur once. Both of O's rescales are cut (two regions): the one after the loop, before the
# last tile's P V, would show where the other goes. The step's other change, the anchor, orders ptxas's schedule, which the emulator
# (not a compiler) cannot see: CTest sass.overlap.08a_intra_overlap judges that one.

flashsteps_exercise(08a_write_rescale_before_issue STAGE 08a_intra_overlap
  TASK "write O's rescales, `rescale_o()` (O = alpha O, with the factor the latest softmax left in `alpha`): in tile j's issue, at the one place in the first region where no wgmma accumulates into O, so that P_{j-1} V_{j-1} adds to O rescaled by alpha_{j-1} and nothing after the softmax touches O (the region holds the issue of P_{j-1} V_{j-1}: a multiply after its commit races the wgmma that writes O), and wherever the second region, after the loop, needs one before the last tile's P V"
  SOLUTION [=[        rescale_o();  // O = alpha_{j-1} O: the previous tile's factor, before P_{j-1} V_{j-1} adds
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
        ptx::wgmma_commit_group();
...
      rescale_o();]=]
  STUB [=[        // P and O are loop-carried: ptxas may have moved them between registers since the fence
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
...
      // O, before the last tile's P V below]=]
  EXPECT "LSE right, only O wrong" TESTS "a non-default softmax scale")
