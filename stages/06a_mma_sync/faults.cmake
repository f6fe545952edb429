# stages/06a_mma_sync/faults.cmake — the planted faults of 06a_mma_sync: one flashsteps_fault() each
# (emu/faults/CMakeLists.txt says what each argument means, emu/faults/README.md how to run them).
# Each changes one line of the stage's source; FROM is that line with enough of its surroundings
# to occur exactly once. emu/faults/faults.cmake reads every stage folder's faults.cmake.

flashsteps_fault(06a_s_rows_swapped STAGE 06a_mma_sync
  BREAKS "a lane stores c2, c3 (row g + 8) where c0, c1 (row g) belong: the S accumulator's layout misread"
  FROM [=[        *reinterpret_cast<float2*>(s_el) = make_float2(s_acc[n][0], s_acc[n][1]);]=]
  TO   [=[        *reinterpret_cast<float2*>(s_el) = make_float2(s_acc[n][2], s_acc[n][3]);]=]
  EXPECT "[1-9][0-9]* rows of LSE wrong" TESTS "a non-default softmax scale")

flashsteps_fault(06a_v_without_trans STAGE 06a_mma_sync
  BREAKS "V_j is read by ldmatrix without .trans: the B operand gets rows of V where it needs columns"
  FROM [=[          ptx::ldmatrix_x4_trans(vb, sV + 2u * (16 * kk * kLdKV + 16 * dp) + v_lane);]=]
  TO   [=[          ptx::ldmatrix_x4(vb, sV + 2u * (16 * kk * kLdKV + 16 * dp) + v_lane);]=]
  EXPECT "LSE right, only O wrong" TESTS "a non-default softmax scale")

flashsteps_fault(06a_a_matrix_order STAGE 06a_mma_sync
  BREAKS "Q's ldmatrix lanes follow K's matrix order: a1 and a2 (rows 8-15 at k 0-7, rows 0-7 at k 8-15) are exchanged"
  FROM [=[      ptx::smem_addr(sQ + (warp_row0 + lane % 16) * kLdQ + 8 * (lane / 16));]=]
  TO   [=[      ptx::smem_addr(sQ + (warp_row0 + lane % 8 + 8 * (lane / 16)) * kLdQ + 8 * ((lane / 8) % 2));]=]
  EXPECT "[1-9][0-9]* rows of LSE wrong" TESTS "a non-default softmax scale")
