# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 10b_split_kv
  TITLE "A paged KV cache: each key tile gathered from the pages of a block table"
  TEACHES "K and V read through the page table: a thread finds the page of its first key once per \
tile and walks page by page, one cp.async per 16 bytes; pages of any multiple of 16 keys, shorter \
than a key tile or spanning several; 10b's splits and combine unchanged"
  PART inference)
