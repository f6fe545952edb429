# stages/08c_d64_tile/faults.cmake — the planted faults of 08c_d64_tile: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

# The step's own (stage 08c): the turns going round three consumers. The persistent loop and the
# tile body are 08b's and 08a's, whose planted faults test them: they are not repeated here.
flashsteps_fault(08c_turn_ring_of_two STAGE 08c_d64_tile
  BREAKS "each consumer opens the turn of (c + 1) mod 2, 08b's ring of two: at D = 64 consumer 2 opens consumer 1's turn and nobody opens consumer 2's, which waits at its turn barrier forever"
  FROM [=[          ptx::named_barrier_arrive(kBarTurn + (cw + 1) % Tile::kConsumers, kTurnThreads);]=]
  TO   [=[          ptx::named_barrier_arrive(kBarTurn + (cw + 1) % 2, kTurnThreads);]=]
  EXPECT "deadlock: every live thread.* bar.sync \\(named barrier\\) \\(barrier 3: 128 of 256 threads arrived\\)"
  TESTS "a non-default softmax scale")

flashsteps_fault(08c_turn_counts_every_consumer STAGE 08c_d64_tile
  BREAKS "a turn barrier counts every consumer's threads (08b's Tile::kConsumerThreads, 256 with two consumers) instead of the two warpgroups of a turn: at D = 64 it waits for 384 threads and only 256 ever arrive"
  FROM [=[  constexpr int kTurnThreads = 2 * Tile::kWarpgroupThreads;]=]
  TO   [=[  constexpr int kTurnThreads = Tile::kConsumerThreads;]=]
  EXPECT "deadlock: every live thread.* bar.sync \\(named barrier\\) \\(barrier 1: 256 of 384 threads arrived\\)"
  TESTS "a non-default softmax scale")
