# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 02_wmma
  TITLE "Online softmax: one fused kernel"
  TEACHES "one fused kernel with a running max and sum; no S in memory"
  LARGE_STEP "three kernels become one fused kernel: the online softmax replaces S in global \
memory")
