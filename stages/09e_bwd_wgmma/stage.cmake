# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). The fifth
# backward step, of kind backward like its parent; built for sm_90a only (wgmma), as 07a.
flashsteps_stage(
  PARENT 09d_bwd_pipelined
  KIND backward
  PART backward
  ARCHS 90a
  TITLE "The backward on wgmma"
  TEACHES "09d's walk with its five products on Hopper's warpgroup MMA, one warpgroup per block: Sᵀ and dPᵀ with both operands in shared memory, dV_j and dK_j with Pᵀ and dSᵀ from the accumulator registers, dQ_i from a transposed dS tile in shared memory; tiles in 07a's swizzled layout, synchronous waits, sm_90a")
