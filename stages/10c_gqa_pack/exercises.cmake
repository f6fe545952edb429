# stages/10c_gqa_pack/exercises.cmake — the exercise of 10c_gqa_pack that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once: the packing map and each packed row's query row.

flashsteps_exercise(10c_write_packing STAGE 10c_gqa_pack
  TASK "write the packing map. The block's tile holds the group * Sq query rows of the `sh.group` query heads that share K/V head bkv % H_kv of sequence bkv / H_kv, the head the fastest index (FlashAttention's pack_gqa). Give `head0`, the group's first query head (of all B * H), `out_row(pr)`, the row of Q, O [B*H*Sq, D] and LSE [B*H*Sq] of packed row pr (Q's rows are loaded through it and every write goes through it), and `my_query[h]`, the query row of this thread's packed row `my_row[h]`, from which the causal mask is aligned"
  SOLUTION [=[  const std::int64_t head0 = bkv * sh.group;  // b * H + kv_head * group, the group's first
  auto out_row = [&](int pr) -> std::int64_t {
    return (head0 + pr % sh.group) * sh.sq + pr / sh.group;
  };
  const int my_query[2] = {my_row[0] / sh.group, my_row[1] / sh.group};]=]
  STUB [=[  // Write the packing map. This stub lays the group's heads one after the other (head0's Sq
  // rows, then the next head's) and takes each packed row as its own query row.
  const std::int64_t head0 = bkv * sh.group;
  auto out_row = [&](int pr) -> std::int64_t { return head0 * sh.sq + pr; };
  const int my_query[2] = {my_row[0], my_row[1]};]=]
  EXPECT "heads: FAIL" TESTS "a KV cache of ragged lengths*")
