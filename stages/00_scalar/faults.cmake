# stages/00_scalar/faults.cmake — the planted faults of 00_scalar: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(00_pv_skips_first_key STAGE 00_scalar
  BREAKS "P V starts at key 1: every row loses its first key's contribution"
  FROM [=[    for (std::int64_t j = 0; j < end; ++j)]=]
  TO   [=[    for (std::int64_t j = 1; j < end; ++j)]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(00_scale_dropped STAGE 00_scalar
  BREAKS "S is stored unscaled: the softmax scale is never applied"
  FROM [=[    s[idx] = acc * sh.scale;]=]
  TO   [=[    s[idx] = acc;]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
