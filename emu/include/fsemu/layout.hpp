// emu/include/fsemu/layout.hpp — which lane holds which element of a tensor-core fragment, read
// off the emulator's instruction models (fsemu/model/tensor_core.hpp) by probing them, for the
// runners' `--emulate --layout` (common/src/runner.cpp).
//
// Nothing here is a typed-in table. A fragment register is opaque to the instructions that take
// it; a matrix coordinate exists only where a matrix has an address: in shared memory. So the
// probes give the models operands that carry their own coordinates:
//   mma.m16n8k16  A and B reach the model through the ldmatrix model, from row-major tiles in a
//                 shared-memory window (A 16 x 16: ldmatrix.x4, lanes 8q .. 8q + 7 giving the
//                 rows of the 8x8 quadrant q = (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7,
//                 k 8-15), (rows 8-15, k 8-15), the order of the ISA's a0..a3; B 16 x 8 stored N x
//                 K, the ".col" operand, ldmatrix.x2 for k 0-7 and 8-15). With A[m][0] = m + 1 and
//                 B[0][n] = 1 (then A[m][0] = 1 and B[0][n] = n + 1) every D register names its
//                 row (column). Then a 1.0 put in ONE lane's A register half, B carrying k + 1 in
//                 column 0, lands in D at (m, 0) with the value k + 1: that register holds A[m][k].
//                 B likewise, with A carrying k + 1 in row 0. A 1.0 put in one C register, A = B =
//                 0, shows C and D share their layout.
//   wgmma m64nNk16  A and B from shared memory through matrix descriptors (no swizzle, K-major),
//                 their elements placed by the model's own descriptor addressing: D's layout as
//                 above; then register A probed one lane-register half at a time, B carrying k + 1.
// Each probe must land in exactly one place and every element must be found exactly once; a
// model that breaks this makes the probe throw std::runtime_error naming what it saw.
#pragma once

#include <string>
#include <vector>

namespace fsemu {

/// Where one matrix element lives: thread (lane within the warp for mma; thread 0..127 of the
/// warpgroup for wgmma), register index within the fragment, and the 16-bit half of a packed
/// register (0 low, 1 high; -1 for a 32-bit accumulator).
struct FragmentSlot {
  int thread = -1;
  int reg = -1;
  int half = -1;
};

/// A rows x cols matrix of slots, row-major.
struct FragmentGrid {
  int rows = 0;
  int cols = 0;
  std::vector<FragmentSlot> cells;
  const FragmentSlot& at(int r, int c) const {
    return cells[static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) +
                 static_cast<std::size_t>(c)];
  }
};

/// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: A 16 x 16 (m, k), B 16 x 8 (k, n),
/// C/D 16 x 8 (m, n).
struct MmaLayouts {
  FragmentGrid a, b, d;
};
MmaLayouts probe_mma_m16n8k16();

/// wgmma.mma_async.m64nNk16.f32.f16.f16: D 64 x n (m, n) and register A 64 x 16 (m, k).
struct WgmmaLayouts {
  int n = 0;
  FragmentGrid d, a;
};
WgmmaLayouts probe_wgmma_m64nNk16(int n);

/// The tables as the runners print them.
std::string mma_m16n8k16_layout_report();
std::string wgmma_m64nNk16_layout_report(int n = 16);

}  // namespace fsemu
