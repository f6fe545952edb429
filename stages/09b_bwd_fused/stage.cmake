# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). The second
# backward step, of kind backward like its parent.
flashsteps_stage(
  PARENT 09a_bwd_scalar
  KIND backward
  PART backward
  TITLE "The fused backward"
  TEACHES "FA2's backward: one block per K/V tile keeps dK_j and dV_j on chip, walks the query tiles, recomputes P from the LSE and adds dQ into an fp32 buffer by atomics; causal tiles skipped"
  LARGE_STEP "eight kernels become three: the five products of a (Q_i, K_j) tile pair run in one kernel from shared memory, which is the data flow of the step itself, so it cannot be split")
