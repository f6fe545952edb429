# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 00_scalar
  TITLE "Shared-memory tiling"
  TEACHES "shared-memory tiling of both products"
  LARGE_STEP "the naive kernels are rewritten as shared-memory tiles: both products change at \
once, and stage 00 is small")
