# stages/09a_bwd_scalar/exercises.cmake — the exercise of 09a_bwd_scalar that asks the reader to
# write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once.

flashsteps_exercise(09a_write_ds STAGE 09a_bwd_scalar
  TASK "write `ds_kernel`'s element: dS = P ∘ (dP − D), the softmax's Jacobian applied to dP, in place over dP (`dp[idx]`), from P (`p[idx]`) and the row's D = rowsum(dO ∘ O) (`dsum`, one float per row bh · Sq + i: element idx lies in row idx / Skv)"
  SOLUTION [=[    dp[idx] = p[idx] * (dp[idx] - dsum[idx / sh.skv]);]=]
  STUB [=[    (void)p, (void)dsum;
    dp[idx] = 0.0f;  // dS = 0: write P ∘ (dP − D)]=]
  EXPECT "dQ max err [^|]* FAIL . dK max err [^|]* FAIL . dV max err [^|]* ok . on .* heads: FAIL"
  TESTS "a non-default softmax scale"
  STUB_OPT -O1)  # its scalar loops run several times slower at the stubs' -O0
