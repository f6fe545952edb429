# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 07d_overlap
  ARCHS 90a
  WATCHDOG
  SASS_OVERLAP
  PART past_cudnn
  TITLE "The overlap, kept: the softmax between the two waits in the compiled code"
  TEACHES "the intra-warpgroup overlap FlashAttention-3 measures, kept in the SASS: O rescaled \
before P V is issued, and a shared-memory store that holds ptxas's wait for P V below the \
softmax, sm_90a")
