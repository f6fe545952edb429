# stages/09c_bwd_mma/exercises.cmake — the exercise of 09c_bwd_mma that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once.

flashsteps_exercise(09c_write_do_trans STAGE 09c_bwd_mma
  TASK "write the load of `ob`, the B fragments of n8 tiles 2dp and 2dp+1 for dV_j += Pᵀ dO_i at k-step kk: dO_i is stored (query, d) row-major with row stride `kRow` bytes, the query is this product's k, and `sdO_bt` is this lane's address at kk = dp = 0 (see `lanes` above): pick the ldmatrix form that hands a lane two neighbours along k"
  SOLUTION [=[        ptx::ldmatrix_x4_trans(ob, sdO_bt + 16u * kk * kRow + 32u * dp);]=]
  STUB [=[        (void)sdO_bt, ob[0] = ob[1] = ob[2] = ob[3] = 0u;  // write the load of dO_i's B fragments]=]
  EXPECT "dQ max err [^|]* ok . dK max err [^|]* ok . dV max err [^|]* FAIL"
  TESTS "a non-default softmax scale")
