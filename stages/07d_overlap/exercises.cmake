# stages/07d_overlap/exercises.cmake — the exercise of 07d_overlap that asks the reader to write the
# step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each argument
# means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that occur once.

flashsteps_exercise(07d_write_turn_arrive STAGE 07d_overlap
  TASK "write the end of this consumer's turn: once its products of tile j are issued, open the other consumer's turn barrier (`kBarTurn + (1 - cw)`, on which the other waits with `named_barrier_sync` before its products, counting both consumers' `Tile::kConsumerThreads`) with `ptx::named_barrier_arrive`, except after consumer 1's last tile, whose opening nobody would wait for: every bar.sync on a turn barrier is matched by exactly one bar.arrive (the ping-pong comment above)"
  SOLUTION [=[      if (cw == 0 || j + 1 < Tc_i)
        ptx::named_barrier_arrive(kBarTurn + (1 - cw), Tile::kConsumerThreads);]=]
  STUB [=[      // the other consumer's turn is never opened: write the arrive that opens it]=]
  EXPECT "deadlock: every live thread.* bar.sync \\(named barrier\\) \\(barrier 2: 128 of 256 threads arrived\\)"
  TESTS "a non-default softmax scale")
