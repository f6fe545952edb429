# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 10b_split_kv
  TITLE "GQA packing: the query heads of one K/V head in the rows of one tile"
  TEACHES "FlashAttention's pack_gqa: the group's query heads folded into the query rows of one \
tile (packed row pr is query row pr / group of head pr % group), so each K/V tile is read once per \
group, with the causal mask of each row's own query row and every write mapped back to its head"
  PART inference)

# Every split count, on the emulator, as 10b tests them: the shared suite's KV cache cases (GQA
# and MQA, Sq 1 to 16, so 1 to 128 packed rows: one tile or two; D 64 and 128, fp16 and bf16,
# causal or not; ragged lengths 0, 1, 77, 300) with FLASHSTEPS_KV_SPLITS forcing 1 (the direct
# epilogue), 3 and 7 splits (more than any of these caches has key tiles: empty splits). The rule's
# own count is emu.10c_gqa_pack's: 2 or 3 splits at the KV cases on the emulated device's 8 SMs.
if(TARGET test_emu_10c_gqa_pack AND TARGET stage10c_emulated)
  foreach(splits 1 3 7)
    set(test emu.10c_gqa_pack.splits_${splits})
    add_test(NAME ${test} COMMAND test_emu_10c_gqa_pack
             "GQA and MQA*,a KV cache of ragged lengths*" ${FLASHSTEPS_CATCH_ARGS})
    set_tests_properties(${test} PROPERTIES LABELS "cpu;emu" ENVIRONMENT "FLASHSTEPS_KV_SPLITS=${splits}"
      FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL}")
  endforeach()
endif()
# The packing in the emulator's global sector counts: 10c reads K/V once per group, 10b once per
# query head (bytes-read.cmake says the shape, the expected bytes and the tolerance), and the
# counts the chapter shows (bytes_read.txt) are still the emulator's.
if(TARGET stage10c_emulated AND TARGET stage10b_emulated)
  add_test(NAME emu.10c_gqa_pack.bytes_read
           COMMAND ${CMAKE_COMMAND} -DPACKED=$<TARGET_FILE:stage10c_emulated>
                   -DPARENT=$<TARGET_FILE:stage10b_emulated>
                   -DCOMMITTED=${CMAKE_CURRENT_LIST_DIR}/bytes_read.txt
                   -P ${CMAKE_CURRENT_LIST_DIR}/bytes-read.cmake)
  set_tests_properties(emu.10c_gqa_pack.bytes_read PROPERTIES LABELS "cpu;emu"
    PASS_REGULAR_EXPRESSION "bytes-read: PASS")
endif()
