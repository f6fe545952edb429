# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 07c_overlap
  ARCHS 90a
  WATCHDOG
  TITLE "Persistent: one block per SM walks the work items a tile scheduler hands it"
  TEACHES "a persistent kernel: a grid of one block per SM, a tile scheduler (static order, \
longest processing time first under the causal mask, static or dynamic), the next item's loads \
under the last one's epilogue, sm_90a")
