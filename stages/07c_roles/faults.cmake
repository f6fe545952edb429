# stages/07c_roles/faults.cmake — the planted faults of 07c_roles: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(07c_dropped_empty_arrive STAGE 07c_roles
  BREAKS "consumers never release a stage of the ring: the producer waits on empty[s] forever once it wraps"
  FROM [=[    cuda::ptx::mbarrier_arrive(&empty[s]);  // K_j, V_j may be overwritten]=]
  TO   [=[    // (planted fault: the release of the stage is gone)]=]
  EXPECT "deadlock: every live thread.* 256 of 256 arrivals pending" TESTS "same inputs twice*")

flashsteps_fault(07c_setmaxnreg_inc_beyond_pool STAGE 07c_roles
  BREAKS "the consumers' setmaxnreg.inc asks for 248 registers: the block's pool (what the producer released) cannot give both warpgroups that many. On hardware setmaxnreg.inc blocks until the pool holds enough (PTX ISA), so the consumers wait forever: a hang, no error. The emulator keeps the pool and reports the hang with the counts"
  FROM [=[  ptx::setmaxnreg_inc<Tile::kConsumerRegs>();]=]
  TO   [=[  ptx::setmaxnreg_inc<248>();]=]
  EXPECT "deadlock: every live thread.*setmaxnreg.inc to 248 from 168 registers per thread .*needs 10240 registers from the block's pool, which holds 8192"
  TESTS "a non-default softmax scale")

flashsteps_fault(07c_v_expect_tx_one_block STAGE 07c_roles
  BREAKS "V's expect_tx counts one 64-column block of the two at D = 128: v_full completes with half of V_j in flight. On hardware no error: P V may read the second half before it lands (a silent race), and the late bytes count against the next phase. The emulator stops where the phase completes with a load outstanding"
  FROM [=[                                           cuda::ptx::space_shared, &v_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBytes));]=]
  TO   [=[                                           cuda::ptx::space_shared, &v_full[s],
                                           static_cast<std::uint32_t>(Tile::kKVBlockBytes));]=]
  EXPECT "while 1 TMA load\\(s\\) tracked by it, 16384 bytes, had not landed: the phase's expect_tx announced fewer bytes"
  TESTS "every head dimension the stage supports*")
