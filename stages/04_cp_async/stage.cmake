# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 03_online_softmax
  TITLE "Asynchronous prefetch with cp.async"
  TEACHES "multi-stage `cp.async` prefetch of K and V")
