# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). The fourth
# backward step, of kind backward like its parent.
flashsteps_stage(
  PARENT 09c_bwd_mma
  KIND backward
  PART backward
  TITLE "Loads in flight"
  TEACHES "09c's kernel with Q_i, dO_i, LSE_i and D_i of the next query tiles copied by cp.async into a two-slot ring while this tile's five products run (FlashAttention-2's own backward): each slot refilled right after the barrier that ends its last read, two block-wide barriers per tile instead of three")
