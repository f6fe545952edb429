# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  TITLE "The scalar baseline"
  TEACHES "the math, plainly: scores, softmax and P·V as three kernels, S in global memory")
