# stages/08b_persistent/exercises.cmake — the exercise of 08b_persistent that asks the reader to
# write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once. The region is in scheduler.cuh, a header: the exercise compiles it through a copy of
# the stage's kernels.cu. (The CPU test tests/cpu/test_tile_scheduler.cpp checks the stage's own
# scheduler.cuh, not the reader's copy: the emulated suite is the reader's judge.)

flashsteps_exercise(08b_write_next_item STAGE 08b_persistent FILE scheduler.cuh
  TASK "write `next_item()`: the work item a persistent block takes after item t, in a grid of `grid` blocks, so that every item in [0, T) goes to exactly one block: the static walk takes t + G (block b: b, b + G, b + 2G, ...), the dynamic one G + `fetched`, the old value of the global counter its producer thread just incremented (the first G items went to the blocks' first turn, item b to block b)"
  SOLUTION [=[  return schedule == Schedule::kStatic ? t + grid : std::int64_t{grid} + fetched;]=]
  STUB [=[  (void)schedule, (void)t, (void)grid, (void)fetched;
  return std::int64_t{1} << 62;  // no next item: every block stops after its first one]=]
  EXPECT "[0-9]+ non-finite outputs \\(unwritten or NaN\\)" TESTS "a grid that fills the GPU*")
