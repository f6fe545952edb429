# stages/09e_bwd_wgmma/exercises.cmake — the exercise of 09e_bwd_wgmma that asks the reader to
# write the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once: the register-A products dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i, which operand comes
# from where and which way its descriptor reads it.

flashsteps_exercise(09e_write_the_rs_products STAGE 09e_bwd_wgmma
  TASK "write dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i for k-step kk (16 queries): `pa[kk]`, `dsa[kk]` are the register A operands packed from the Sᵀ and dPᵀ accumulators, `desc<kMnMajor, kRows>(tile, kk)` is the descriptor of k16 step kk of a swizzled (kRows, D) tile, read K-major (false) or MN-major (true), `regs<N>(acc)` is an accumulator as N registers, and ptx::wgmma_m64n64k16_rs<T> (D = 64) and ptx::wgmma_m64n128k16_rs<T> (D = 128) take (accumulator, A registers, B descriptor, scale-d). Which way must dO_i and Q_i be read, whose k is the query?"
  SOLUTION [=[        ptx::wgmma_m64n64k16_rs<T>(regs<32>(dv_acc), pa[kk], desc<true, Br>(sdO, kk), 1);
        ptx::wgmma_m64n64k16_rs<T>(regs<32>(dk_acc), dsa[kk], desc<true, Br>(sQ, kk), 1);
...
        ptx::wgmma_m64n128k16_rs<T>(regs<64>(dv_acc), pa[kk], desc<true, Br>(sdO, kk), 1);
        ptx::wgmma_m64n128k16_rs<T>(regs<64>(dk_acc), dsa[kk], desc<true, Br>(sQ, kk), 1);]=]
  STUB [=[        // D = 64: write dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i (m64n64k16, A from registers)
...
        // D = 128: the same with m64n128k16]=]
  EXPECT "dK max err [^|]*FAIL . dV max err [^|]*FAIL"
  TESTS "a non-default softmax scale")
