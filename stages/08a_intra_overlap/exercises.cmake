# stages/08a_intra_overlap/exercises.cmake — the exercise of 08a_intra_overlap that asks the reader
# to write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what
# each argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines
# that occur once.
#
# Part III's larger exercise: the reader writes the overlap inside a warpgroup, the whole of what
# this step keeps or changes in a consumer's tile around the softmax. Its four regions are cut here
# from kernels.cu by the kernel's own lines, so that none is a copy to keep in step with it:
#   1. the issue: S_j = Q K_j^T as one commit group, then (not in tile 0) O's rescale by the
#      previous tile's factor and O += P_{j-1} V_{j-1} as a second, each batch after its fence
#      (from "// A register fence" up to "// Issued: the other consumer");
#   2. the wait for S_j alone, P_{j-1} V_{j-1} still running (from "// S_j is the older group" up
#      to the closing `//! [wgmma]`);
#   3. the wait for P_{j-1} V_{j-1} and the release of stage j - 1 (from "// P_{j-1} V_{j-1} has
#      landed" up to `//! [p_in_registers]`);
#   4. the last tile's rescale, O += P V and its wait, after the loops (from its `rescale_o();` up
#      to "// (No arrive on empty").
# Both P V products and both rescales are cut, so neither is left as a twin of the other; no wgmma,
# commit or wait_group is left in the stub. What stays: the waits for K_j and V_{j-1}, 07d's turns,
# the softmax, the anchor, the packing of P and the loops over the tiles. The anchor, the step's
# other change, orders ptxas's schedule, which the emulator (not a compiler) cannot see: CTest
# sass.overlap.08a_intra_overlap judges that one.

file(READ "${CMAKE_CURRENT_LIST_DIR}/kernels.cu" fs08a_text)
set(fs08a_solution "")
set(fs08a_k 0)
# Each region: from the first anchor's line up to (not including) the second anchor's line.
foreach(fs08a_pair
        "\n      // A register fence, not a memory one|\n      // Issued: the other consumer may issue"
        "\n      // S_j is the older group|\n      //! [wgmma]\n\n"
        "\n      // P_{j-1} V_{j-1} has landed in O|\n      //! [p_in_registers]\n      // The S accumulator"
        "\n      rescale_o();\n      ptx::wgmma_fence();|\n      // (No arrive on empty")
  string(FIND "${fs08a_pair}" "|" fs08a_bar)
  string(SUBSTRING "${fs08a_pair}" 0 ${fs08a_bar} fs08a_from)
  math(EXPR fs08a_bar "${fs08a_bar} + 1")
  string(SUBSTRING "${fs08a_pair}" ${fs08a_bar} -1 fs08a_to)
  fsemu_exercise_anchor("${fs08a_text}" "${fs08a_from}" fs08a_begin fs08a_error)
  if(fs08a_error STREQUAL "")
    fsemu_exercise_anchor("${fs08a_text}" "${fs08a_to}" fs08a_end fs08a_error)
  endif()
  if(NOT fs08a_error STREQUAL "")
    message(FATAL_ERROR "stages/08a_intra_overlap/exercises.cmake: kernels.cu must hold each "
                        "anchor once (the exercise's regions are cut by them): ${fs08a_error}")
  endif()
  math(EXPR fs08a_begin "${fs08a_begin} + 1")
  math(EXPR fs08a_n "${fs08a_end} - ${fs08a_begin}")
  string(SUBSTRING "${fs08a_text}" ${fs08a_begin} ${fs08a_n} fs08a_region)
  if(fs08a_k GREATER 0)
    string(APPEND fs08a_solution "\n...\n")
  endif()
  string(APPEND fs08a_solution "${fs08a_region}")
  math(EXPR fs08a_k "${fs08a_k} + 1")
endforeach()

flashsteps_exercise(08a_write_intra_overlap STAGE 08a_intra_overlap
  TASK "write the overlap inside a warpgroup: a consumer's products of tile j and their waits, and the last tile's P V after the loops (the stub keeps the waits for K_j and V_{j-1}, the turns, the softmax, the anchor and the packing of P). In the first region issue S_j = Q K_j^T (q_desc, k_desc of stage s) as one commit group and then, except in tile 0, O += P_{j-1} V_{j-1} (p_frag, v_desc of stage sp) as a second, each batch after a wgmma_fence. O takes its rescale rescale_o() (the factor alpha the previous softmax left) before that product is issued, at the one place where no wgmma accumulates into O, so that nothing after the softmax touches O. In the second wait for S_j alone (wgmma_wait_group<1>, tile 0 has one group) and fence s_acc, so that P_{j-1} V_{j-1} runs under the softmax. In the third wait for P V (wgmma_wait_group<0>), fence o_acc and p_frag, and, except in tile 0, release stage sp on its empty barrier. In the fourth, the last tile's product: the rescale, O += P V, and its wait"
  SOLUTION "${fs08a_solution}"
  STUB [=[      // (yours: S_j, then O's rescale and O += P_{j-1} V_{j-1} except in tile 0)
...
      // (yours: the wait for S_j alone)
...
      // (yours: the wait for P_{j-1} V_{j-1}, then the release of stage sp except in tile 0)
...
      // (yours: the last tile's rescale, O += P V and its wait)]=]
  EXPECT "[1-9][0-9]* wrong O elements"
  TESTS "a non-default softmax scale")

unset(fs08a_text)
unset(fs08a_error)
unset(fs08a_solution)
unset(fs08a_region)
unset(fs08a_k)
