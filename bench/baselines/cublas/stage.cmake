# The manifest of this baseline: what the build, tests, bench, book and scripts know of it
# (flashsteps_stage(), in stages/flashsteps_add_stage.cmake). Not a stage: no parent, no chapter;
# every stage is compared with it.
flashsteps_stage(
  BASELINE
  TITLE "Unfused cuBLAS baseline"
  TEACHES "what a practitioner writes without fusion: two cuBLAS GEMMs and a softmax")
