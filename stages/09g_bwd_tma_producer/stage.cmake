# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). The seventh
# backward step, of kind backward like its parent; built for sm_90a only (wgmma, setmaxnreg);
# its threads wait on mbarriers in loops, so its suite links a build with the watchdog on.
flashsteps_stage(
  PARENT 09f_bwd_dq_writer
  KIND backward
  PART backward
  ARCHS 90a
  WATCHDOG
  TITLE "The backward's TMA producer: Q, dO, LSE and D in flight during the products"
  TEACHES "09f's free warp becomes FlashAttention-3's producer: one lane loads K_j, V_j and each query tile's Q_i, dO_i (3-D tensor maps, 128-byte swizzle, zero fill past Sq) and LSE_i, D_i (1-D maps) by TMA into a two-slot mbarrier ring (full barriers armed with expect_tx, empty barriers the math threads arrive on once they no longer read a slot); the math warpgroup only waits, sm_90a")
