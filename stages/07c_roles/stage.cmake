# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 07b_tma
  ARCHS 90a
  WATCHDOG
  TITLE "TMA and warpgroup roles: a producer warpgroup, mbarriers, setmaxnreg, two consumers"
  TEACHES "TMA with full/empty mbarriers and `expect_tx`, a producer warpgroup and two \
consumer warpgroups, `setmaxnreg`, O by a TMA store; synchronous `wgmma` (sm_90a)"
  LARGE_STEP "three things change together because each needs the others: one producer thread \
copies by TMA in place of every thread by cp.async, which needs the mbarrier \
ring with expect_tx, which frees a warpgroup role, so the block becomes a \
producer and two consumers with setmaxnreg, and O leaves by a TMA store. The \
kernel already uses the names of 07d, so that the next step is the overlap alone")
