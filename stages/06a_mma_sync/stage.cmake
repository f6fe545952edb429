# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 04_cp_async
  TITLE "mma.sync and ldmatrix in place of WMMA"
  TEACHES "`mma.sync` and `ldmatrix` in place of WMMA: fragments a kernel can address; stage \
04's data flow")
