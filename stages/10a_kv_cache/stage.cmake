# The manifest of this stage: its place in the stage tree and what the build, tests, bench, book
# and scripts know of it (flashsteps_stage(), in stages/flashsteps_add_stage.cmake).
flashsteps_stage(
  PARENT 06c_swizzle
  TITLE "KV cache: K/V read by groups of query heads, one length per sequence"
  TEACHES "a KV cache as decode reads it: query head h reads K/V head h / (H / H_kv) (GQA, MQA), \
and each sequence attends to its own cache_seqlens[b] keys, causal aligned to that length"
  PART inference)
