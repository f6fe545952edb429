# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). The third
# backward step, of kind backward like its parent.
flashsteps_stage(
  PARENT 09b_bwd_fused
  KIND backward
  PART backward
  TITLE "The backward on tensor cores"
  TEACHES "09b's five products on mma.sync m16n8k16 with ldmatrix: each warp computes Sᵀ and dPᵀ for its 16 keys, so Pᵀ and dSᵀ stay in registers as the A operand of dV and dK; dO and Q are read with ldmatrix.trans, and dSᵀ goes through shared memory, read transposed, for dQ"
  LARGE_STEP "the five products are the step: each of 09b's scalar loops becomes mma.sync fragments fed by ldmatrix, and the orientation of each (Sᵀ and dPᵀ so that Pᵀ and dSᵀ are the next A operands) decides the others, so they cannot move one at a time without a throw-away layout; the walk, D, the causal skip, the atomics and the conversion are 09b's lines. A split would also add a kernel file to CI's compile for no lesson")
