# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). A child of
# 09g (09f's before 09g existed), of kind backward; built for sm_90a only (wgmma, setmaxnreg,
# TMA); its threads wait on mbarriers and, in the deterministic mode, on a semaphore in global
# memory, so its suite links a build with the watchdog on.
flashsteps_stage(
  PARENT 09g_bwd_tma_producer
  KIND backward
  PART backward
  ARCHS 90a
  WATCHDOG
  TITLE "A deterministic backward: dQ added in the order of the key tiles"
  TEACHES "09g with FlashAttention-3's deterministic mode, chosen at launch (--deterministic): a per-query-tile semaphore in global memory, cleared by the preprocess; the dQ writer of key tile j waits (ld.acquire, __nanosleep) until the tile's semaphore says j, reduce-adds, waits for the adds' full completion (cp.async.bulk.wait_group 0, not .read) and releases j + 1 (st.release); why the order cannot deadlock given the order blocks are dispatched in; sm_90a")

# The mode on the emulator (emu.09h_bwd_deterministic itself runs the suite with the mode off,
# the parent's behaviour):
#  - .mode: the whole shared suite with the mode on (FLASHSTEPS_DETERMINISTIC=1: every launch
#    asks it; its "same inputs twice" case then compares bits);
#  - .seeds: the suite's hidden [seeds] cases — the same launch under six schedule seeds, dQ, dK,
#    dV the same bits with the mode on, and dQ not the same bits under some seed with it off (the
#    first case could not fail otherwise).
if(TARGET test_emu_09h_bwd_deterministic)
  add_test(NAME emu.09h_bwd_deterministic.mode COMMAND test_emu_09h_bwd_deterministic
           ${FLASHSTEPS_CATCH_ARGS})
  add_test(NAME emu.09h_bwd_deterministic.seeds COMMAND test_emu_09h_bwd_deterministic "[seeds]"
           ${FLASHSTEPS_CATCH_ARGS})
  set_tests_properties(emu.09h_bwd_deterministic.mode PROPERTIES LABELS "cpu;emu" COST 30
    ENVIRONMENT "FLASHSTEPS_DETERMINISTIC=1" FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL}")
  set_tests_properties(emu.09h_bwd_deterministic.seeds PROPERTIES LABELS "cpu;emu"
    FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL}")
endif()

# And the mode under ThreadSanitizer (emu.tsan.09h_bwd_deterministic runs it off): the writer's
# semaphore waits park blocks. emu/sanitize.cmake adds the stage's sanitizer builds at the end of
# the top-level directory, so this test is added after them.
function(_fs_09h_tsan_mode)
  if(TARGET test_emu_09h_bwd_deterministic_tsan)
    add_test(NAME emu.tsan.09h_bwd_deterministic.mode COMMAND test_emu_09h_bwd_deterministic_tsan
             "${FSEMU_SANITIZER_CASES}" ${FLASHSTEPS_CATCH_ARGS})
    set_tests_properties(emu.tsan.09h_bwd_deterministic.mode PROPERTIES
      LABELS "cpu;emu;sanitizer" ENVIRONMENT "${FSEMU_SANITIZER_ENV};FLASHSTEPS_DETERMINISTIC=1"
      FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL};Sanitizer")
  endif()
endfunction()
if(NOT CMAKE_SCRIPT_MODE_FILE)
  cmake_language(DEFER DIRECTORY "${PROJECT_SOURCE_DIR}" CALL _fs_09h_tsan_mode)
endif()
