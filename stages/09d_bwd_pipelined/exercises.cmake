# stages/09d_bwd_pipelined/exercises.cmake — the exercise of 09d_bwd_pipelined that asks the reader
# to write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what
# each argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines
# that occur once. The ring's control, in three regions: the tiles the prologue puts in flight,
# the wait at the top of a tile, and the refill after barrier (C), each with the comment that would
# give it away. Its TESTS are the long sums, whose walk of 64 query tiles wraps the ring (the other
# small cases walk two tiles or fewer).

flashsteps_exercise(09d_write_the_ring STAGE 09d_bwd_pipelined
  TASK "write the ring's control. `prefetch(i)` issues this thread's copies of query tile i into slot i % Tile::kStages and commits one group (an empty one past the last tile), `slot(i)` is that slot. First region, after K_j and V_j's copies: put the first query tiles of the walk (from `i_first`) in flight, as many as the ring has slots. Second region, at the top of tile i: the `cuda::pipeline_consumer_wait_prior<N>(pipe)` after which tile i's group has landed (how many of this thread's newest groups may still be in flight there?). Third region, right after barrier (C), which ends every read of slot i % kStages: the refill, the tile that goes into that slot"
  SOLUTION [=[#pragma unroll
  for (int p = 0; p < Tile::kStages; ++p)
    prefetch(i_first + p);
...
    // This thread's copies of tile i have landed: only the kStages - 1 newest groups (tiles
    // i+1 .. i+kStages-1) may still be in flight. At the first tile this covers K_j, V_j too.
    cuda::pipeline_consumer_wait_prior<Tile::kStages - 1>(pipe);
...
    // Tile i + kStages goes into the slot tile i has just left; it flies during this tile's dQ
    // and the next kStages - 1 tiles.
    prefetch(i + Tile::kStages);]=]
  STUB [=[  pipe.producer_commit();  // K_j, V_j's group. Write the prologue: the query tiles in flight
...
    // the wait: write how many of this thread's newest groups may still be in flight here
...
    // the refill: write which tile goes into the slot tile i has just left]=]
  EXPECT "dQ max err [^|]*non- ?finite[^|]*FAIL . dK max err [^|]*non- ?finite[^|]*FAIL . dV max err [^|]*non- ?finite[^|]*FAIL"
  TESTS "a backward stage sums*")
