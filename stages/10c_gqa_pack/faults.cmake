# stages/10c_gqa_pack/faults.cmake — the planted faults of 10c_gqa_pack: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the packing this step adds to 10b; 10b's faults (the split range, the
# partial's 1/l, the combine's empty row) stay 10b's. They are judged on the suite's ragged-length
# case: groups of 2 query heads (H 2, H_kv 1), Sq 1 and 16 (2 and 32 packed rows), causal and not,
# 3 splits by the rule on the emulated device, so the partials' writes and the combine run.

flashsteps_fault(10c_every_row_first_head STAGE 10c_gqa_pack
  BREAKS "every packed row is mapped to the group's first query head: all rows read that head's Q and write its O, and the other heads' rows of O are never written (still the poison)"
  FROM [=[    return (head0 + pr % sh.group) * sh.sq + pr / sh.group;]=]
  TO   [=[    return head0 * sh.sq + pr / sh.group;]=]
  EXPECT "[1-9][0-9]* NaN" TESTS "a KV cache of ragged lengths*")

flashsteps_fault(10c_partial_to_next_head STAGE 10c_gqa_pack
  BREAKS "a split writes each packed row's partial O to the row of the next packed row (pr ^ 1: the other head of its pair) while its LSE goes to its own: the combine gives each head its neighbour's O"
  FROM [=[      float* dst = o_part + (split * sh.bh * sh.sq + out_row(my_row[h])) * D + 2 * t;]=]
  TO   [=[      float* dst = o_part + (split * sh.bh * sh.sq + out_row(my_row[h] ^ 1)) * D + 2 * t;]=]
  EXPECT "heads: FAIL" TESTS "a KV cache of ragged lengths*")

flashsteps_fault(10c_causal_from_packed_row STAGE 10c_gqa_pack
  BREAKS "the causal mask of a packed row is taken from the packed row pr instead of its query row pr / group: a row of the second head, or of a later query, sees keys past its diagonal"
  FROM [=[  const int my_query[2] = {my_row[0] / sh.group, my_row[1] / sh.group};]=]
  TO   [=[  const int my_query[2] = {my_row[0], my_row[1]};]=]
  EXPECT "heads: FAIL" TESTS "a KV cache of ragged lengths*")
