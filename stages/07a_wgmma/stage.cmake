# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 06c_swizzle
  ARCHS 90a
  TITLE "wgmma: warpgroup MMA on swizzled shared memory, one warpgroup per block"
  TEACHES "`wgmma` in place of `mma.sync`: descriptors, K- and MN-major operands, the 128-byte \
swizzle, the fences; one warpgroup per block, synchronous waits, sm_90a")
