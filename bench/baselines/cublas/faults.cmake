# bench/baselines/cublas/faults.cmake — the planted faults of cublas: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

# S and P are stored at a padded row pitch (score_pitch); Skv = 300 in the test below is not a
# multiple of 8, so a call that mixes up Skv and the pitch reads the wrong rows.
flashsteps_fault(baseline_softmax_reads_unpadded_s STAGE baseline_cublas
  BREAKS "the softmax reads S at pitch Skv although the first GEMM wrote it at the padded pitch"
  FROM [=[{pr.batch_heads() * pr.seq_q, sq, skv, ld, ld}]=]
  TO   [=[{pr.batch_heads() * pr.seq_q, sq, skv, skv, ld}]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")

flashsteps_fault(baseline_pv_reads_unpadded_p STAGE baseline_cublas
  BREAKS "the second GEMM reads P at pitch Skv although the softmax wrote it at the padded pitch"
  FROM [=[p, cuda_type<T>(), ld, static_cast<long long>(sq) * ld,]=]
  TO   [=[p, cuda_type<T>(), skv, static_cast<long long>(sq) * ld,]=]
  EXPECT "heads: FAIL" TESTS "a non-default softmax scale")
