# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). The sixth
# backward step, of kind backward like its parent; built for sm_90a only (wgmma, setmaxnreg);
# its threads wait on mbarriers in loops, so its suite links a build with the watchdog on.
flashsteps_stage(
  PARENT 09e_bwd_wgmma
  KIND backward
  PART backward
  ARCHS 90a
  WATCHDOG
  TITLE "The backward's dQ writer: a bulk reduce-add from shared memory"
  TEACHES "09e's math warpgroup beside a writer warpgroup (setmaxnreg): each tile's dQ_i partial staged in shared memory, announced on an mbarrier, added into a per-tile fp32 accumulator by one warp's bulk reduce-add (cp.reduce.async.bulk .add.f32), the buffer handed back after the .read wait; fence.proxy.async between the stores and the reduce, sm_90a")
