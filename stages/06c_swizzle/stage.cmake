# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 06b_registers
  MEASURED_AS 06_registers
  TITLE "Swizzle: the XOR swizzle in place of padded rows"
  TEACHES "the XOR swizzle in place of padded shared-memory rows; with it, the tile loop tuned \
as the measured kernel has it (Bc = 128 at D = 64, the unmasked fast path, ex2.approx)")
