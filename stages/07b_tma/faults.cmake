# stages/07b_tma/faults.cmake — the planted faults of 07b_tma: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(07b_k_expect_tx_one_block STAGE 07b_tma
  BREAKS "K's expect_tx counts one 64-column block of the two at D = 128: k_full completes with half of K_j in flight. On hardware no error: the phase completes when the first 16 KiB land, S may read the second half before it lands (a silent race), and the late bytes count against the next phase. The emulator lands a phase's loads in order and stops where the phase completes with a load outstanding"
  FROM [=[                                           cuda::ptx::space_shared, &k_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBytes));]=]
  TO   [=[                                           cuda::ptx::space_shared, &k_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBlockBytes));]=]
  EXPECT "while 1 TMA load\\(s\\) tracked by it, 16384 bytes, had not landed: the phase's expect_tx announced fewer bytes"
  TESTS "every head dimension the stage supports*")

flashsteps_fault(07b_k_full_parity STAGE 07b_tma
  BREAKS "every thread waits on the wrong parity of k_full[s], the parity of the phase before K_j's: while K_j is in flight the wait returns at once (for tile 0, a fresh barrier's previous phase counts as complete) and S reads K_j before it lands, a silent race, but once K_j has landed the phase it waits for is the next one, K_{j+kStages}'s, which thread 0, waiting too, never issues: a hang. Which one hardware shows depends on when the copy lands. The emulator lands a TMA load when a thread first waits on its barrier, so it always takes the second and reports the hang"
  FROM [=[    wait_parity(&k_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "k_full", s);]=]
  TO   [=[    wait_parity(&k_full[s], (static_cast<std::uint32_t>(j / kStages) & 1u) ^ 1u, "k_full", s);]=]
  EXPECT "deadlock: every live thread of the block waits .*for the phase of parity 1" TESTS "a non-default softmax scale")
