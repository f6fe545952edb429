# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 07b_tma
  ARCHS 90a
  WATCHDOG
  TITLE "Warpgroup roles: a producer warpgroup, empty mbarriers, setmaxnreg, two consumers"
  TEACHES "a producer warpgroup and two consumer warpgroups, empty mbarriers in place of the \
block barrier, `setmaxnreg`, O by a TMA store; synchronous `wgmma` (sm_90a)")
