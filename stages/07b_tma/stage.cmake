# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 07a_wgmma
  ARCHS 90a
  WATCHDOG
  TITLE "TMA: one thread copies each tile, mbarriers count its bytes"
  TEACHES "TMA in place of cp.async: tensor maps, one thread issuing the copies, mbarriers armed \
with `expect_tx` and waited on by phase parity; still one warpgroup and synchronous `wgmma` (sm_90a)")
