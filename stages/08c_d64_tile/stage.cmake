# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 08b_persistent
  ARCHS 90a
  WATCHDOG
  SASS_OVERLAP
  PART past_cudnn
  TITLE "A tile for D = 64: three consumer warpgroups, 192 query rows per block"
  TEACHES "the consumer-warpgroup count as a tile parameter: three consumers (Br = 192) at \
D = 64, where the registers allow it, two at D = 128; the setmaxnreg arithmetic for 512 threads, \
the turns going round three consumers, sm_90a")

# Every work item exactly once, on the emulator, whatever the grid, as 08b's tests, for the tile of
# 192 query rows (the runner's default D = 64; FLASHSTEPS_PERSISTENT_BLOCKS replaces one block per
# SM, FLASHSTEPS_TILE_SCHEDULER picks the schedule), for both schedules and both orders:
#  - the emulated runner on one shape per order, its --profile printing the grid it launched
#    (the test fails unless that is the grid asked for) and its check PASS: one block, fewer blocks
#    than items, as many, more; the causal shape (B=2 H=3 Sq=300 Skv=100: T = 12 items) has a
#    query block whose 192 rows see no key (rows 0 .. 199 see none: an item with no key tile);
#  - the shared GPU suite's output check on two of its larger cases at 3 blocks, fewer than their
#    items (both head dims: D = 128 keeps 08b's tile of two consumers). 08b's tests run them at 1,
#    3 and 100 blocks; the scheduler is 08b's, and what this step changes, the item count of the
#    tile, the runner's grids above cover at 1 to 64 blocks (CI time: each such run is ~15 s here).
if(TARGET test_emu_08c_d64_tile AND TARGET stage08c_emulated)
  foreach(schedule static dynamic)
    foreach(shape noncausal causal)
      if(shape STREQUAL "causal")
        set(args --batch 2 --heads 3 --seq 300 --seq-kv 100 --causal)
      else()
        set(args --batch 2 --heads 3 --seq 197)
      endif()
      set(counts 1 5 12 64)  # T = 2 * 3 * ceil(Sq / 192) = 12 for Sq = 197 and 300
      foreach(blocks IN LISTS counts)
        set(test emu.08c_d64_tile.grid_${blocks}_${schedule}_${shape})
        add_test(NAME ${test} COMMAND stage08c_emulated ${args} --profile)
        set_tests_properties(${test} PROPERTIES LABELS "cpu;emu"
          ENVIRONMENT "FLASHSTEPS_PERSISTENT_BLOCKS=${blocks};FLASHSTEPS_TILE_SCHEDULER=${schedule}"
          PASS_REGULAR_EXPRESSION "grid \\(${blocks}, 1, 1\\)[^\n]*\n.*heads: PASS"
          FAIL_REGULAR_EXPRESSION "FAIL")
      endforeach()
    endforeach()
    foreach(blocks 3)
      set(test emu.08c_d64_tile.suite_${blocks}_${schedule})
      add_test(NAME ${test} COMMAND test_emu_08c_d64_tile
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
  # and (4): three sections, the last a partial one, each of Tr = ceil(300 / 192) = 2 query
  # blocks (T = 10 items on 3 blocks, the dynamic schedule). The runner checks every head.
  fsemu_runner_with_definitions(stage08c_sections 08c_d64_tile FLASHSTEPS_SCHEDULER_SECTION_BYTES=98304)
  add_test(NAME emu.08c_d64_tile.sections
           COMMAND stage08c_sections --batch 1 --heads 5 --seq 300 --seq-kv 150 --causal --profile)
  set_tests_properties(emu.08c_d64_tile.sections PROPERTIES LABELS "cpu;emu"
    ENVIRONMENT "FLASHSTEPS_PERSISTENT_BLOCKS=3;FLASHSTEPS_TILE_SCHEDULER=dynamic"
    PASS_REGULAR_EXPRESSION "grid \\(3, 1, 1\\)[^\n]*\n.*over 5 of 5 heads: PASS"
    FAIL_REGULAR_EXPRESSION "FAIL")
endif()
