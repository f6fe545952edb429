# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 01_tiled
  TITLE "Tensor cores through WMMA"
  TEACHES "tensor cores through WMMA fragments"
  LARGE_STEP "the inner products move from scalar loops to WMMA fragments in both kernels")
