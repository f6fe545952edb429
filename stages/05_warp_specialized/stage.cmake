# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 04_cp_async
  WATCHDOG
  TITLE "Warp specialization: producer and consumer warps"
  TEACHES "producer warps load, consumer warps compute")
