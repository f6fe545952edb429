# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 06a_mma_sync
  TITLE "Registers: S, P and O stay in the warp (FlashAttention-2)"
  TEACHES "S, P, O and Q kept in registers, the softmax on the accumulator (FlashAttention-2's \
data flow)")
