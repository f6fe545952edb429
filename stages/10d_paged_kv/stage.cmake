# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 10b_split_kv
  TITLE "A paged KV cache: each key tile gathered from the pages of a block table"
  TEACHES "K and V read through the page table: a thread finds the page of its first key once per \
tile and walks page by page, one cp.async per 16 bytes; pages of any multiple of 16 keys, shorter \
than a key tile or spanning several; 10b's splits and combine unchanged"
  PART inference)

# Pages under splits: the shared suite's paged case (pages of 16, 64 and 256 keys, lengths 0, 65
# and 300) with 3 splits forced, so that splits start inside pages and pages span splits. (10b's
# forced-split sweep of the unpaged KV cases stays 10b's: this step does not change the splits.)
if(TARGET test_emu_10d_paged_kv)
  add_test(NAME emu.10d_paged_kv.splits_3 COMMAND test_emu_10d_paged_kv "a paged KV cache*"
                                                  ${FLASHSTEPS_CATCH_ARGS})
  set_tests_properties(emu.10d_paged_kv.splits_3 PROPERTIES LABELS "cpu;emu"
    ENVIRONMENT "FLASHSTEPS_KV_SPLITS=3" FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL}")
endif()
