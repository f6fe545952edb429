// emu/include/fsemu/model/tensor_core.hpp — pure instruction models of the tensor-core instructions
// the stages use: mma.sync m16n8k16, ldmatrix m8n8 and wgmma.mma_async m64nNk16 (with its matrix
// descriptor and canonical shared-memory layouts). Each function takes the operands of ALL
// participating lanes at once (a warp, or a warpgroup of 128 threads) and computes what the PTX
// ISA defines, nothing about scheduling: the emulator's runtime gathers the lanes' registers,
// calls the model once, and scatters the result.
//
// Every layout here is derived from the PTX ISA's own text, not from the stages' helpers, so the
// emulator can check a stage against the ISA. The sections relied on (titles as in the PTX ISA;
// numbers move between manual versions, the titles stay):
//   - "Matrix Fragments for mma.m16n8k16 with floating point type" (A, B, C/D fragment formulas)
//   - "Warp-level matrix load instruction: ldmatrix" (row addresses per thread, fragment layout,
//     .trans, natural alignment of the 16-byte rows)
//   - "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions":
//       "Register Fragments" / "Matrix Fragments for wgmma.mma_async.m64nNk16" (A and D)
//       "Shared Memory Matrix Layout", "Major-ness supported by Strides" (Leading / Stride
//       Dimension Byte Offset), "Canonical Layouts", "Matrix Descriptor Format"
//       "wgmma.mma_async" (operands, scale-d, imm-trans-a/b, the valid shapes)
// Anything the ISA forbids that a model can see is a Fault (fault.hpp) with a sentence naming the
// instruction, the rule and the values.
#pragma once

#include <cstdint>

#include "fsemu/model/fault.hpp"

namespace fsemu::model {

/// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 for one warp, in place:
/// acc = a * b + acc. Registers per lane, as the ISA's "Matrix Fragments for mma.m16n8k16 with
/// floating point type" lays them out (groupID g = lane >> 2, threadID_in_group t = lane % 4):
///   a[lane][r] (.f16x2/.bf16x2): A[g + 8 (r % 2)][2t + 8 (r / 2) + h], h = 0 low half, 1 high
///   b[lane][r]:                  B[2t + 8 r + h][g]                    (B is K x N = 16 x 8)
///   acc[lane][i] (f32):          C[g + 8 (i / 2)][2t + i % 2]
/// Products of 16-bit values are exact in fp32; the sum starts from C and adds the 16 products in
/// k order, rounding to fp32 after each addition (the ISA leaves the order unspecified).
void mma_m16n8k16(Elem e, const std::uint32_t (&a)[32][4], const std::uint32_t (&b)[32][2],
                  float (&acc)[32][4]);

/// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16 for one warp. count = 1, 2 or 4
/// matrices; addr[lane] is the shared address lane gives: lanes 8m .. 8m + 7 give rows 0..7 of
/// matrix m, each the start of 8 contiguous 16-bit elements (16 bytes, 16-byte aligned — a Fault
/// otherwise). Lanes past 8 * count are ignored. Result: out[4g + t][m] holds row g, columns 2t
/// (low half) and 2t + 1 (high half) of matrix m; with .trans, column g, rows 2t and 2t + 1.
/// out[lane][m] for m >= count is left as it was.
void ldmatrix(const SharedWindow& smem, int count, bool trans, const std::uint32_t (&addr)[32],
              std::uint32_t (&out)[32][4]);

/// A wgmma matrix descriptor ("Matrix Descriptor Format"), decoded. The address fields are in
/// BYTES (the descriptor stores them >> 4): start = bits 0-13 << 4, lbo = bits 16-29 << 4,
/// sbo = bits 32-45 << 4. base_offset = bits 49-51, swizzle = bits 62-63 (0 none / interleave,
/// 1 = 128B, 2 = 64B, 3 = 32B).
struct WgmmaDesc {
  std::uint32_t start = 0, lbo = 0, sbo = 0;
  int base_offset = 0;
  int swizzle = 0;
};
WgmmaDesc decode_wgmma_desc(std::uint64_t desc);

/// The shared address of element (mn, k) of the 16-bit operand tile a descriptor describes (A: mn
/// is the row m; B: mn is the column n; k in 0..15), by the ISA's "Canonical Layouts" (T = 8
/// 16-bit elements = 16 bytes; offsets in bytes):
///   K-major  none: ((8,m),(T,2)) : ((16, SBO), (2, LBO))
///            32B / 64B / 128B: ((8,m),(T,2)) : ((W, SBO), (2, 16)), W = 32 / 64 / 128 bytes
///   MN-major none: ((T,1,m),(8,2)) : ((2, -, SBO), (16, LBO))
///            32B / 64B / 128B: ((T,W/16,m),(8,2)) : ((2, 16, LBO), (W, SBO))
/// added to the start address, then swizzled on the absolute address: Swizzle<B,4,3> (B = 1, 2, 3
/// for 32B, 64B, 128B) XORs address bits 4 .. 4+B-1 (the 16-byte chunk) with bits 7 .. 7+B-1.
/// base_offset (swizzled modes) is the phase of a repeating pattern that does not start on its
/// 256/512/1024-byte boundary, (pattern start >> 7) & 7; the model takes the XOR key from
/// ((address >> 7) - base_offset) so that such a pattern reads back as written.
std::uint32_t wgmma_element_addr(const WgmmaDesc& d, bool mn_major, int mn, int k);

/// wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T (T = f16 or bf16) for one warpgroup (threads
/// 0..127), computed at once: D = A * B + (scale_d ? D : 0), A 64 x 16, B 16 x N, imm-scale-a =
/// imm-scale-b = 1. n: 8..256, step 8 (a Fault otherwise).
///   A from shared memory (a_regs == nullptr): descriptor desc_a, tnsp_a = imm-trans-a (1 =
///     M-major); from registers: a_regs[thread][0..3], warp w = thread / 32 holding rows 16w ..
///     16w + 15 in the mma.m16n8k16 A layout above (imm-trans-a does not exist then: tnsp_a must
///     be false, a Fault otherwise).
///   B from shared memory via desc_b, tnsp_b = imm-trans-b (1 = N-major).
///   d[thread] points at the thread's n / 2 fp32 accumulators: d[thread][4i + 2h + j] =
///     D[16w + g + 8h][8i + 2t + j] (g = (thread % 32) / 4, t = thread % 4).
/// Sums as mma_m16n8k16 does: from (scale_d ? D : +0), the 16 products in k order.
void wgmma_m64nNk16(Elem e, int n, const SharedWindow& smem, std::uint64_t desc_a,
                    const std::uint32_t (*a_regs)[4], bool tnsp_a, std::uint64_t desc_b,
                    bool tnsp_b, float* const (&d)[128], bool scale_d);

}  // namespace fsemu::model
