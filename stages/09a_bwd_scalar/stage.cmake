# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). The first
# backward step: the root of its own line of the tree (no parent), of kind backward.
flashsteps_stage(
  KIND backward
  PART backward
  TITLE "The scalar backward"
  TEACHES "the gradients, plainly: D = rowsum(dO ∘ O), S, P, dP and dS in global memory, dQ, dK and dV as separate kernels")
