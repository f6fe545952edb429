# stages/10b_split_kv/faults.cmake — the planted faults of 10b_split_kv: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the code this step adds to 10a's; 10a's faults stay 10a's. The suite's
# KV cache cases run 2 splits by the rule on the emulated device (8 SMs: B*H = 8 blocks of 16
# slots), so every one of them reads split partials and the combine.

flashsteps_fault(10b_split_range_overlap STAGE 10b_split_kv
  BREAKS "a split reads one key tile past its range, the first tile of the next split: that tile's keys are counted twice, in two partials the combine adds"
  FROM [=[  const int t_end = min(t_begin + sh.split_tiles, Tc_i);]=]
  TO   [=[  const int t_end = min(t_begin + sh.split_tiles + 1, Tc_i);]=]
  EXPECT "heads: FAIL" TESTS "a KV cache of ragged lengths*")

flashsteps_fault(10b_partial_without_1_over_l STAGE 10b_split_kv
  BREAKS "a split writes its unnormalised O (the sum of exp-weighted V) instead of O / l, while its LSE already counts l: the combine's weights multiply l in a second time"
  FROM [=[            make_float2(o_acc[n][2 * h] * inv_l[h], o_acc[n][2 * h + 1] * inv_l[h]);]=]
  TO   [=[            make_float2(o_acc[n][2 * h], o_acc[n][2 * h + 1]);]=]
  EXPECT "heads: FAIL" TESTS "a KV cache of ragged lengths*")

flashsteps_fault(10b_combine_no_key_nan STAGE 10b_split_kv
  BREAKS "the combine subtracts lse_max even when it is -inf (a sequence of length 0: no split saw a key): exp(-inf - -inf) = NaN spreads into the row's O"
  FROM [=[  const float shift = lse_max == -INFINITY ? 0.0f : lse_max;]=]
  TO   [=[  const float shift = lse_max;]=]
  EXPECT "[1-9][0-9]* NaN" TESTS "a KV cache of ragged lengths*")
