# stages/08c_d64_tile/exercises.cmake — the exercise of 08c_d64_tile that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.
# Both arrives of the ring are cut (two regions): the one that opens consumer 0's first turn shows
# the call the other needs.

flashsteps_exercise(08c_write_turn_ring STAGE 08c_d64_tile
  TASK "write the turn ring's two arrives (`ptx::named_barrier_arrive` on a turn barrier, counting `kTurnThreads`, the two warpgroups of a turn): before any tile, the last consumer (`kLast`) opens consumer 0's first turn, `kBarTurn + 0`, in a block that has tiles, and at the end of this consumer's turn, for any number of consumers: once its products of tile j are issued, open the turn barrier of the next consumer in the ring, `kBarTurn + (cw + 1) % Tile::kConsumers`, except after the last consumer's (`kLast`) last tile, whose opening nobody would wait for: every bar.sync on a turn barrier is matched by exactly one bar.arrive (the ping-pong comment above)"
  SOLUTION [=[      if (cw == kLast && Tc_i > 0) ptx::named_barrier_arrive(kBarTurn + 0, kTurnThreads);
...
        if (cw != kLast || j + 1 < Tc_i)
          ptx::named_barrier_arrive(kBarTurn + (cw + 1) % Tile::kConsumers, kTurnThreads);]=]
  STUB [=[      // consumer 0's first turn is never opened: write the arrive that opens it
...
        // the next consumer's turn is never opened: write the arrive that opens it]=]
  EXPECT "deadlock: every live thread.* bar.sync \\(named barrier\\) \\(barrier 2: 128 of 256 threads arrived\\)"
  TESTS "a non-default softmax scale")
