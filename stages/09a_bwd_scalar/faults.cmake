# stages/09a_bwd_scalar/faults.cmake — the planted faults of 09a_bwd_scalar: one flashsteps_fault()
# each (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run
# them). Each changes one line of the stage's source; FROM is that line with enough of its
# surroundings to occur exactly once. The evidence names which gradients the check found wrong:
# a fault in dS leaves dV = Pᵀ dO right and breaks dQ and dK; a fault in P breaks all three.

flashsteps_fault(09a_d_from_wrong_tensor STAGE 09a_bwd_scalar
  BREAKS "D is computed as rowsum(dO ∘ dO) instead of rowsum(dO ∘ O): dS = P ∘ (dP − D) is wrong"
  FROM [=[      acc += to_f32(doi[d]) * to_f32(oi[d]);]=]
  TO   [=[      acc += to_f32(doi[d]) * to_f32(doi[d]);]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* FAIL . dV max err [^|]* ok . on .* heads: FAIL"
  TESTS "a non-default softmax scale")

flashsteps_fault(09a_lse_wrong_base STAGE 09a_bwd_scalar
  BREAKS "P is recomputed as 2^(S − LSE), but LSE is a natural log: every P, and so every gradient, is wrong"
  FROM [=[    s[idx] = j < causal_kv_end(i, sh.sq, sh.skv, kCausal) ? expf(s[idx] - lse[row]) : 0.0f;]=]
  TO   [=[    s[idx] = j < causal_kv_end(i, sh.sq, sh.skv, kCausal) ? exp2f(s[idx] - lse[row]) : 0.0f;]=]
  EXPECT "dV max err [^|]* FAIL . on .* heads: FAIL"
  TESTS "a non-default softmax scale")

flashsteps_fault(09a_ds_without_d STAGE 09a_bwd_scalar
  BREAKS "dS = P ∘ dP, without the − D term: the softmax's Jacobian loses its rank-one part"
  FROM [=[    dp[idx] = p[idx] * (dp[idx] - dsum[idx / sh.skv]);]=]
  TO   [=[    dp[idx] = p[idx] * dp[idx];]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* FAIL . dV max err [^|]* ok . on .* heads: FAIL"
  TESTS "a non-default softmax scale")
