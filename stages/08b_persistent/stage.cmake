# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 07b_tma_roles
  ARCHS 90a
  WATCHDOG
  MEASURED_AS 07_hopper
  TITLE "Overlap: ping-pong consumers, the softmax under the other products (FlashAttention-3)"
  TEACHES "the overlap: ping-pong of the two consumers and the softmax under the other \
products (FlashAttention-3), sm_90a")
