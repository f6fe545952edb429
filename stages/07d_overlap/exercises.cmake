# stages/07d_overlap/exercises.cmake — the exercise of 07d_overlap that asks the reader to write the
# step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.
#
# One of Part II's larger exercises: the reader writes a consumer's issue order, the whole of what
# this step changes in 07c's tile. Its region and its stub are cut here from kernels.cu by the
# kernel's own lines, so that neither is a copy to keep in step with it:
#   SOLUTION  from the tile's opening `//! [wait]` to the end of the last tile's P V after the loops;
#   STUB      that region less the issue order: the waits, the turns, both batches of products and
#             the wait for S_j (up to the closing `//! [wgmma]`), the wait for P V and the release
#             of the stage (from "// Keeps the softmax" to the arrive on empty), and the last
#             tile's P V. What stays is 07c's: the softmax, the rescale, the packing of P and the
#             loops over the tiles. No product, wait or release is left to copy from.

file(READ "${CMAKE_CURRENT_LIST_DIR}/kernels.cu" fs07d_text)
set(fs07d_at "")
# Where each anchor (whole lines, each once in kernels.cu) starts.
foreach(fs07d_anchor
        "\n    //! [wait]\n    // K_j has landed"
        "\n    ptx::wgmma_fence_operand(s_acc);\n    //! [wgmma]\n"
        "\n    // Keeps the softmax above the wait below"
        "\n      cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten\n"
        "\n  // The last tile's O += P V"
        "\n    // (No arrive on empty: the producer has issued its last tile and waits for nothing.)\n  }\n")
  fsemu_exercise_anchor("${fs07d_text}" "${fs07d_anchor}" fs07d_first fs07d_error)
  if(NOT fs07d_error STREQUAL "")
    message(FATAL_ERROR "stages/07d_overlap/exercises.cmake: kernels.cu must hold each anchor "
                        "once (the exercise's region is cut by them): ${fs07d_error}")
  endif()
  string(LENGTH "${fs07d_anchor}" fs07d_n)
  math(EXPR fs07d_end "${fs07d_first} + ${fs07d_n}")
  list(APPEND fs07d_at ${fs07d_first} ${fs07d_end})
endforeach()
# fs07d_at: start and end of each anchor; an anchor's text begins after its leading "\n".
list(GET fs07d_at 0 fs07d_wait)
list(GET fs07d_at 3 fs07d_issued)
list(GET fs07d_at 4 fs07d_keeps)
list(GET fs07d_at 7 fs07d_released)
list(GET fs07d_at 8 fs07d_last_pv)
list(GET fs07d_at 11 fs07d_end)
math(EXPR fs07d_begin "${fs07d_wait} + 1")
math(EXPR fs07d_n "${fs07d_end} - 1 - ${fs07d_begin}")  # without the last line's "\n"
string(SUBSTRING "${fs07d_text}" ${fs07d_begin} ${fs07d_n} fs07d_solution)
math(EXPR fs07d_n "${fs07d_keeps} + 1 - ${fs07d_issued}")
string(SUBSTRING "${fs07d_text}" ${fs07d_issued} ${fs07d_n} fs07d_softmax)
math(EXPR fs07d_n "${fs07d_last_pv} + 1 - ${fs07d_released}")
string(SUBSTRING "${fs07d_text}" ${fs07d_released} ${fs07d_n} fs07d_rescale_pack_loops)
string(CONCAT fs07d_stub
       "    float s_acc[Tile::kSRegs];  // (64, Bc) fp32 S_j strip: Bc/8 n8 slices x 4\n"
       "    // (yours: the waits for K_j and V_{j-1}, the turn, S_j and P_{j-1} V_{j-1}, the wait for S_j)\n"
       "${fs07d_softmax}"
       "    // (yours: the wait for P_{j-1} V_{j-1} and the release of stage j - 1)\n"
       "${fs07d_rescale_pack_loops}"
       "  // (yours: the last tile's O += P V, after the loops)")

flashsteps_exercise(07d_write_issue_order STAGE 07d_overlap
  TASK "write a consumer's tile in 07d's issue order, and the last tile's P V after the loops (the stub keeps 07c's softmax, rescale and packing of P). Wait for K_j on k_full[s] and, except in tile 0, for V_{j-1} on v_full of its stage sp = (j + kStages - 1) % kStages. Take this consumer's turn (named_barrier_sync on kBarTurn + cw for both consumers' threads), issue S_j = Q K_j^T as one commit group and then, except in tile 0, O += P_{j-1} V_{j-1} from p_frag as a second, each batch after a wgmma_fence, and open the other consumer's turn as the ping-pong comment above says. Wait with wgmma_wait_group<1> for S_j alone (tile 0 has one group), and after the softmax with wgmma_wait_group<0> for P V: only then may the rescale touch O and every consumer thread release stage sp on its empty barrier, one tile later than 07c releases a stage"
  SOLUTION "${fs07d_solution}"
  STUB "${fs07d_stub}"
  EXPECT "the block ends with [0-9]+ TMA loads into shared memory that nobody waited for"
  TESTS "a non-default softmax scale")

unset(fs07d_text)
unset(fs07d_error)
unset(fs07d_at)
unset(fs07d_solution)
unset(fs07d_stub)
unset(fs07d_softmax)
unset(fs07d_rescale_pack_loops)
