# stages/07b_tma/faults.cmake — the planted faults of 07b_tma: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(07b_k_expect_tx_one_block STAGE 07b_tma
  BREAKS "K's expect_tx counts one 64-column block of the two at D = 128: k_full completes with half of K_j in flight"
  FROM [=[                                           cuda::ptx::space_shared, &k_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBytes));]=]
  TO   [=[                                           cuda::ptx::space_shared, &k_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBlockBytes));]=]
  EXPECT "while 1 TMA load\\(s\\) tracked by it, 16384 bytes, had not landed: the phase's expect_tx announced fewer bytes"
  TESTS "every head dimension the stage supports*")

flashsteps_fault(07b_k_full_parity STAGE 07b_tma
  BREAKS "every thread waits on the wrong parity of k_full[s]: a fresh barrier's previous phase counts as complete, so tile 0's S reads K_0 before it has landed"
  FROM [=[    wait_parity(&k_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "k_full", s);]=]
  TO   [=[    wait_parity(&k_full[s], (static_cast<std::uint32_t>(j / kStages) & 1u) ^ 1u, "k_full", s);]=]
  EXPECT "deadlock: every live thread of the block waits .*for the phase of parity 1" TESTS "a non-default softmax scale")
