# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 08a_intra_overlap
  ARCHS 90a
  WATCHDOG
  SASS_OVERLAP
  PART past_cudnn
  TITLE "Persistent: one block per SM walks the work items a tile scheduler hands it"
  TEACHES "a persistent kernel: a grid of one block per SM, a tile scheduler (static order, \
longest processing time first under the causal mask, static or dynamic), the next item's loads \
under the last one's epilogue, sm_90a")

# Every work item exactly once, on the emulator, whatever the grid (the launcher's
# FLASHSTEPS_PERSISTENT_BLOCKS replaces one block per SM; FLASHSTEPS_TILE_SCHEDULER picks the
# schedule), for both schedules and both orders (non-causal: static order; causal: LPT):
#  - the emulated runner on one shape per order, its --profile printing the grid it launched
#    (the test fails unless that is the grid asked for) and its check PASS: one block, fewer blocks
#    than items, as many, more; the causal shape (B=2 H=3 Sq=300 Skv=150: T = 18 items) has a
#    query block whose rows see no key (an item with no key tile);
#  - the shared GPU suite's output check on two of its larger cases at one block, 3 and 100.
# The scheduler's mapping alone: tests/cpu/test_tile_scheduler.cpp.
if(TARGET test_emu_08b_persistent AND TARGET stage08b_emulated)
  foreach(schedule static dynamic)
    foreach(shape noncausal causal)
      if(shape STREQUAL "causal")
        set(args --batch 2 --heads 3 --seq 300 --seq-kv 150 --causal)
        set(counts 1 5 18 64)  # T = 2 * 3 * ceil(300 / 128) = 18
      else()
        set(args --batch 2 --heads 3 --seq 197)
        set(counts 1 5 12 64)  # T = 2 * 3 * ceil(197 / 128) = 12
      endif()
      foreach(blocks IN LISTS counts)
        set(test emu.08b_persistent.grid_${blocks}_${schedule}_${shape})
        add_test(NAME ${test} COMMAND stage08b_emulated ${args} --profile)
        set_tests_properties(${test} PROPERTIES LABELS "cpu;emu"
          ENVIRONMENT "FLASHSTEPS_PERSISTENT_BLOCKS=${blocks};FLASHSTEPS_TILE_SCHEDULER=${schedule}"
          PASS_REGULAR_EXPRESSION "grid \\(${blocks}, 1, 1\\)[^\n]*\n.*heads: PASS"
          FAIL_REGULAR_EXPRESSION "FAIL")
      endforeach()
    endforeach()
    foreach(blocks 1 3 100)
      set(test emu.08b_persistent.suite_${blocks}_${schedule})
      add_test(NAME ${test} COMMAND test_emu_08b_persistent
               "a grid that fills the GPU*,Sq != Skv both ways*" ${FLASHSTEPS_CATCH_ARGS})
      set_tests_properties(${test} PROPERTIES LABELS "cpu;emu"
        ENVIRONMENT "FLASHSTEPS_PERSISTENT_BLOCKS=${blocks};FLASHSTEPS_TILE_SCHEDULER=${schedule}")
    endforeach()
  endforeach()
  # Several LPT sections in one run, the kernel (not only the host model of
  # tests/cpu/test_tile_scheduler.cpp) across them: the stage's kernels compiled again with
  # sections of 96 KiB (FLASHSTEPS_SCHEDULER_SECTION_BYTES, scheduler.cuh; the GPU builds keep
  # 32 MiB, which no emulated shape fills), on the causal shape B=1 H=5 Sq=300 Skv=150 at D = 64:
  # 2 * 2 B * 64 * 150 = 37.5 KiB of K and V a head, 2 heads a section, so heads (0, 1), (2, 3)
  # and (4): three sections, the last a partial one, each of Tr = ceil(300 / 128) = 3 query
  # blocks (T = 15 items on 3 blocks, the dynamic schedule). The runner checks every head.
  fsemu_runner_with_definitions(stage08b_sections 08b_persistent FLASHSTEPS_SCHEDULER_SECTION_BYTES=98304)
  add_test(NAME emu.08b_persistent.sections
           COMMAND stage08b_sections --batch 1 --heads 5 --seq 300 --seq-kv 150 --causal --profile)
  set_tests_properties(emu.08b_persistent.sections PROPERTIES LABELS "cpu;emu"
    ENVIRONMENT "FLASHSTEPS_PERSISTENT_BLOCKS=3;FLASHSTEPS_TILE_SCHEDULER=dynamic"
    PASS_REGULAR_EXPRESSION "grid \\(3, 1, 1\\)[^\n]*\n.*over 5 of 5 heads: PASS"
    FAIL_REGULAR_EXPRESSION "FAIL")
endif()
