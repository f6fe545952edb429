# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 10a_kv_cache
  TITLE "Split-KV: the keys of a decode row split over blocks, the partials merged exactly"
  TEACHES "FlashDecoding: each block row's keys split over several blocks by FlashAttention's \
wave-efficiency rule, each writing a partial O in fp32 and its LSE, and a combine kernel that \
rescales them by exp(lse - lse_max), sums and divides"
  PART inference)

# Every split count, on the emulator: the shared suite's KV cache cases (GQA and MQA, Sq 1 to 16,
# D 64 and 128, fp16 and bf16, causal or not; ragged lengths 0, 1, 77, 300) with
# FLASHSTEPS_KV_SPLITS forcing 1 (10a's path) and 3 splits, and 7, more than any of these caches
# has key tiles (at most 5: 300 keys of 64), so every problem has empty splits. 2 splits are the
# rule's own count there, emu.10b_split_kv's (the whole suite, no override: 2 splits at the KV
# cases on the emulated device's 8 SMs, B*H = 8 blocks of 16 slots; 1 on the grid that fills
# it). The rule alone: tests/cpu/test_split_rule.cpp.
if(TARGET test_emu_10b_split_kv AND TARGET stage10b_emulated)
  foreach(splits 1 3 7)
    set(test emu.10b_split_kv.splits_${splits})
    add_test(NAME ${test} COMMAND test_emu_10b_split_kv
             "GQA and MQA*,a KV cache of ragged lengths*" ${FLASHSTEPS_CATCH_ARGS})
    set_tests_properties(${test} PROPERTIES LABELS "cpu;emu" ENVIRONMENT "FLASHSTEPS_KV_SPLITS=${splits}"
      FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL}")
  endforeach()
  # The forced count reaches the launch (the runner's --profile prints each kernel's grid: the
  # attention kernel's (B*H, 3) and the combine's), and the combine keeps large scores finite: at
  # a softmax scale of 30 the LSE is in the hundreds, where exp(lse) overflows fp32 (past 88.7), so
  # only weights exp(lse_s - lse_max) give the right O.
  add_test(NAME emu.10b_split_kv.large_scores
           COMMAND stage10b_emulated --batch 2 --heads 2 --seq 3 --seq-kv 300 --scale 30 --profile)
  set_tests_properties(emu.10b_split_kv.large_scores PROPERTIES LABELS "cpu;emu"
    ENVIRONMENT "FLASHSTEPS_KV_SPLITS=3"
    PASS_REGULAR_EXPRESSION "grid \\(4, 3, 1\\).*grid \\(3, 1, 1\\).*heads: PASS"
    FAIL_REGULAR_EXPRESSION "FAIL")
endif()
