# stages/08b_persistent/exercises.cmake — the exercise of 08b_persistent that asks the reader to
# write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once. The region is in scheduler.cuh, a header: the exercise compiles it through a copy of
# the stage's kernels.cu. (The CPU test tests/cpu/test_tile_scheduler.cpp checks the stage's own
# scheduler.cuh, not the reader's copy: the emulated suite is the reader's judge.) The region
# takes next_item()'s doc comment with it, which states the two formulas.

flashsteps_exercise(08b_write_next_item STAGE 08b_persistent FILE scheduler.cuh
  TASK "write `next_item()`: the work item a persistent block takes after item t, in a grid of `grid` blocks, under either schedule, so that every item in [0, T) goes to exactly one block: in the static schedule each block walks its own fixed sequence of items (the picture at the top of this file), in the dynamic one the block's producer thread has just incremented a global counter that starts at 0, `fetched` is its old value, and the first `grid` items went to the blocks' first turns, item b to block b, without the counter"
  SOLUTION [=[/// The item a block takes after item t: static, t + G; dynamic, G + the counter's old value (the
/// first G items went to the blocks' first turn, item b to block b). `fetched` is that value,
/// which only the dynamic schedule uses.
FS_HOST_DEVICE inline std::int64_t next_item(Schedule schedule, std::int64_t t, int grid,
                                             int fetched) {
  return schedule == Schedule::kStatic ? t + grid : std::int64_t{grid} + fetched;]=]
  STUB [=[/// The item a block takes after item t (the exercise's task above).
FS_HOST_DEVICE inline std::int64_t next_item(Schedule schedule, std::int64_t t, int grid,
                                             int fetched) {
  (void)schedule, (void)t, (void)grid, (void)fetched;
  return std::int64_t{1} << 62;  // no next item: every block stops after its first one]=]
  EXPECT "[0-9]+ non-finite outputs \\(unwritten or NaN\\)" TESTS "a grid that fills the GPU*")
