// emu/src/model/tensor_core.cpp — the tensor-core instruction models (tensor_core.hpp), each
// written from the PTX ISA section named above it. No lane scheduling here: every function sees
// the operands of all participating lanes at once.
#include "fsemu/model/tensor_core.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace fsemu::model {
namespace {

std::string hex(std::uint64_t v) {
  return "0x" + SharedWindow::hex(v);
}

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t lo16(std::uint32_t r) {
  return static_cast<std::uint16_t>(r & 0xFFFFu);
}
std::uint16_t hi16(std::uint32_t r) {
  return static_cast<std::uint16_t>(r >> 16);
}

// One 16-bit element from shared memory, with a Fault that names the instruction and the element
// when it lies outside the block's window (the message is built only on failure).
template <class Describe>
std::uint16_t load16(const SharedWindow& smem, std::uint32_t addr, Describe&& describe) {
  if (std::uint64_t{addr} + 2 > smem.size)
    throw Fault(describe() + ": shared address " + hex(addr) + " + 2 bytes lies outside the " +
                "block's " + std::to_string(smem.size) + " bytes of shared memory");
  return smem.load<std::uint16_t>(addr, "tensor-core operand");
}

// d = c + sum_k a[k] * b[k], k in order, fp32 after each step (products of 16-bit values are exact
// in fp32, so only the additions round).
float dot16(float c, const float* a, const float* b, int b_stride) {
  float s = c;
  for (int k = 0; k < 16; ++k) {
    const float p = a[k] * b[k * b_stride];
    s = s + p;
  }
  return s;
}

}  // namespace

// The 16-bit formats: fp16 = IEEE binary16 (1 sign, 5 exponent bits with bias 15, 10 fraction
// bits); bf16 = the upper half of an IEEE binary32 (1, 8 with bias 127, 7). Both embed exactly in
// binary32: bf16 by a shift, fp16 by re-biasing the exponent (subnormals become normal fp32).
float elem_to_float(Elem e, std::uint16_t bits) {
  if (e == Elem::bf16) return bits_to_float(std::uint32_t{bits} << 16);
  const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1Fu;
  std::uint32_t frac = bits & 0x3FFu;
  if (exp == 0x1F)  // inf (frac 0) or NaN (payload kept, quiet bit included)
    return bits_to_float(sign | 0x7F800000u | (frac << 13));
  if (exp != 0) return bits_to_float(sign | ((exp - 15 + 127) << 23) | (frac << 13));
  if (frac == 0) return bits_to_float(sign);  // +-0
  // Subnormal: frac * 2^-24. Normalize: shift the leading 1 up to bit 10.
  int e2 = -14;  // exponent of the implicit bit position once frac has bit 10 set
  while ((frac & 0x400u) == 0) {
    frac <<= 1;
    --e2;
  }
  return bits_to_float(sign | (static_cast<std::uint32_t>(e2 + 127) << 23) |
                       ((frac & 0x3FFu) << 13));
}

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type":
//   groupID = %laneid >> 2, threadID_in_group = %laneid % 4
//   A (a0..a7, two per .f16x2 register, low half first):
//     row = groupID for ai, 0 <= i < 2 || 4 <= i < 6; groupID + 8 otherwise
//     col = threadID_in_group * 2 + (i & 1) for i < 4; + 8 for i >= 4
//   B (b0..b3): row = threadID_in_group * 2 + (i & 1) (+ 8 for i >= 2), col = groupID
//   C/D (c0..c3): row = groupID for i < 2, groupID + 8 for i >= 2; col = threadID_in_group * 2
//     + (i & 1)
// The operation (PTX ISA, "Multiply-and-Accumulate Instruction: mma"): D = A * B + C, A 16 x 16
// (.row), B 16 x 8 (.col), C and D 16 x 8.
void mma_m16n8k16(Elem e, const std::uint32_t (&a)[32][4], const std::uint32_t (&b)[32][2],
                  float (&acc)[32][4]) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 8; ++i) {  // element ai lives in register i / 2, half i % 2
      const int row = ((i < 2) || (i >= 4 && i < 6)) ? g : g + 8;
      const int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      const std::uint32_t r = a[lane][i / 2];
      A[row][col] = elem_to_float(e, (i & 1) ? hi16(r) : lo16(r));
    }
    for (int i = 0; i < 4; ++i) {
      const int row = t * 2 + (i & 1) + (i >= 2 ? 8 : 0);
      const std::uint32_t r = b[lane][i / 2];
      B[row][g] = elem_to_float(e, (i & 1) ? hi16(r) : lo16(r));
    }
    for (int i = 0; i < 4; ++i)
      C[i < 2 ? g : g + 8][t * 2 + (i & 1)] = acc[lane][i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? g : g + 8, col = t * 2 + (i & 1);
      acc[lane][i] = dot16(C[row][col], A[row], &B[0][col], 8);
    }
  }
}

// PTX ISA, "Warp-level matrix load instruction: ldmatrix":
//   - "The eight addresses required for each matrix are provided by eight threads": threads 0-7
//     give addr0-addr7 (matrix 0), 8-15 matrix 1 (.x2, .x4), 16-23 and 24-31 matrices 2, 3 (.x4).
//     "Each address corresponds to the start of a matrix row."
//   - "When reading 8x8 matrices, a group of four consecutive threads loads 16 bytes. The matrix
//     addresses must be naturally aligned accordingly": every row address is 16-byte aligned.
//   - "Each thread in a warp loads fragments of a row, with thread 0 receiving the first fragment
//     in its register r, and so on. A group of four threads loads an entire row" (the figure
//     "ldmatrix fragment layout for one 8x8 Matrix with 16-bit elements": thread 4g + t holds
//     row g, elements 2t, 2t + 1). Matrix m goes to destination register m.
//   - ".trans indicates that the matrix is loaded in column-major format": thread 4g + t then
//     holds column g, elements (rows) 2t and 2t + 1.
void ldmatrix(const SharedWindow& smem, int count, bool trans, const std::uint32_t (&addr)[32],
              std::uint32_t (&out)[32][4]) {
  if (count != 1 && count != 2 && count != 4)
    throw Fault("ldmatrix.m8n8: .num must be .x1, .x2 or .x4 (1, 2 or 4 matrices), got " +
                std::to_string(count));
  auto name = [&] {  // built only for a Fault's message
    return std::string("ldmatrix.sync.aligned.m8n8.x") + std::to_string(count) +
           (trans ? ".trans" : "") + ".shared.b16";
  };
  for (int m = 0; m < count; ++m) {
    std::uint16_t M[8][8];
    for (int row = 0; row < 8; ++row) {
      const int lane = 8 * m + row;
      const std::uint32_t p = addr[lane];
      if (p % 16 != 0)
        throw Fault(name() + ": lane " + std::to_string(lane) + " gives row " +
                    std::to_string(row) + " of matrix " + std::to_string(m) +
                    " at shared address " + hex(p) +
                    ", which is not 16-byte aligned (each 16-byte row must be naturally aligned)");
      if (std::uint64_t{p} + 16 > smem.size)
        throw Fault(name() + ": lane " + std::to_string(lane) + " gives row " +
                    std::to_string(row) + " of matrix " + std::to_string(m) +
                    " at shared address " + hex(p) + " + 16 bytes, outside the block's " +
                    std::to_string(smem.size) + " bytes of shared memory");
      for (int c = 0; c < 8; ++c)
        M[row][c] = smem.load<std::uint16_t>(p + 2u * static_cast<std::uint32_t>(c), "ldmatrix");
    }
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane >> 2, t = lane % 4;
      const std::uint16_t lo = trans ? M[2 * t][g] : M[g][2 * t];
      const std::uint16_t hi = trans ? M[2 * t + 1][g] : M[g][2 * t + 1];
      out[lane][m] = std::uint32_t{lo} | (std::uint32_t{hi} << 16);
    }
  }
}

// PTX ISA, "Matrix Descriptor Format" (wgmma): bits 13-0 matrix-descriptor-encode(start
// address), 29-16 encode(leading dimension byte offset), 45-32 encode(stride dimension byte
// offset), 51-49 matrix base offset, 63-62 swizzle mode (0 none, 1 128B, 2 64B, 3 32B), where
// matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4.
WgmmaDesc decode_wgmma_desc(std::uint64_t desc) {
  WgmmaDesc d;
  d.start = static_cast<std::uint32_t>(desc & 0x3FFFu) << 4;
  d.lbo = static_cast<std::uint32_t>((desc >> 16) & 0x3FFFu) << 4;
  d.sbo = static_cast<std::uint32_t>((desc >> 32) & 0x3FFFu) << 4;
  d.base_offset = static_cast<int>((desc >> 49) & 0x7u);
  d.swizzle = static_cast<int>((desc >> 62) & 0x3u);
  return d;
}

// PTX ISA, "Shared Memory Matrix Layout" / "Major-ness supported by Strides" / "Canonical
// Layouts" (wgmma). In CuTe notation, with T = 128 / 16 = 8 elements (one 16-byte unit), LBO and
// SBO in elements, m / k the repeat counts across rows / columns:
//   MN-major  none:  ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))     Swizzle<0,4,3>
//             32B:   ((T,2,m),(8,k)) : ((1,T,LBO),(2T,SBO))     Swizzle<1,4,3>
//             64B:   ((T,4,m),(8,k)) : ((1,T,LBO),(4T,SBO))     Swizzle<2,4,3>
//             128B:  ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))     Swizzle<3,4,3>
//   K-major   none:  ((8,m),(T,2k))  : ((1T,SBO),(1,LBO))       Swizzle<0,4,3>
//             32B:   ((8,m),(T,2k))  : ((2T,SBO),(1,T))         Swizzle<1,4,3>
//             64B:   ((8,m),(T,2k))  : ((4T,SBO),(1,T))         Swizzle<2,4,3>
//             128B:  ((8,m),(T,2k))  : ((8T,SBO),(1,T))         Swizzle<3,4,3>
// (the first mode is MN, the second K). The same in words ("Leading/Stride Dimension Byte
// Offset", in 128-bit units): K-major LBO = the offset between the two 8-column halves of the 8x2
// core-matrix tile when not swizzled, unused ("assumed to be 1") when swizzled; K-major SBO = from
// the first 8 rows to the next 8; MN-major interleave: LBO from the first 8 columns to the next 8,
// SBO from one row to the next; MN-major swizzled: LBO from the first swizzle-width/16 rows to
// the next (the next block of MN), SBO from the first 8 columns (k) to the next 8.
// Swizzle<B,4,3> acts on byte addresses: bits [4, 4+B) ^= bits [7, 7+B). "Matrix Descriptor
// Format": the repeating pattern of 128B / 64B / 32B swizzle starts on a 1024 / 512 / 256-byte
// boundary when base offset = 0, otherwise base offset = (pattern start addr >> 7) & 7.
std::uint32_t wgmma_element_addr(const WgmmaDesc& d, bool mn_major, int mn, int k) {
  if (k < 0 || k >= 16 || mn < 0 || mn >= 256)
    throw Fault("wgmma matrix descriptor: element (mn " + std::to_string(mn) + ", k " +
                std::to_string(k) +
                ") lies outside a 16-bit k16 operand tile (k 0..15, mn 0..255)");
  if (d.swizzle < 0 || d.swizzle > 3)
    throw Fault("wgmma matrix descriptor: swizzle mode " + std::to_string(d.swizzle) +
                " is not one of 0 (none), 1 (128B), 2 (64B), 3 (32B)");
  // Width in bytes of one swizzled row (the atom's contiguous dimension) and the swizzle's B.
  static constexpr std::uint32_t kWidth[4] = {16, 128, 64, 32};
  static constexpr int kBits[4] = {0, 3, 2, 1};
  const std::uint32_t W = kWidth[d.swizzle];
  const std::uint32_t umn = static_cast<std::uint32_t>(mn), uk = static_cast<std::uint32_t>(k);
  std::uint32_t off;
  if (!mn_major) {
    // K-major: rows are mn (8 per core-matrix group), the 16 k are two 8-element (16-byte) units.
    const std::uint32_t i0 = umn % 8, i1 = umn / 8, j0 = uk % 8, j1 = uk / 8;
    if (d.swizzle == 0)
      off = i0 * 16 + i1 * d.sbo + j0 * 2 + j1 * d.lbo;
    else
      off = i0 * W + i1 * d.sbo + j0 * 2 + j1 * 16;
  } else {
    // MN-major: rows are k (8 per group), each row W / 2 contiguous mn elements.
    const std::uint32_t per = W / 2;  // mn elements per row: 8, 64, 32, 16
    const std::uint32_t i01 = umn % per, i2 = umn / per, j0 = uk % 8, j1 = uk / 8;
    if (d.swizzle == 0)
      off = i01 * 2 + i2 * d.sbo + j0 * 16 + j1 * d.lbo;
    else
      off = i01 * 2 + i2 * d.lbo + j0 * W + j1 * d.sbo;
  }
  std::uint32_t addr = d.start + off;
  const int B = kBits[d.swizzle];
  if (B > 0) {
    const std::uint32_t mask = (1u << B) - 1u;
    const std::uint32_t key =
        ((addr >> 7) - static_cast<std::uint32_t>(d.base_offset)) & mask;  // pattern row phase
    addr ^= key << 4;
  }
  return addr;
}

// PTX ISA, "wgmma.mma_async": D = A * B + D (D = A * B when scale-d is false), A M x K, B K x N,
// D M x N; A from registers or a descriptor, B from a descriptor. "The transpose operation is
// only supported for the wgmma.mma_async variants with .f16/.bf16 types on matrices accessed from
// shared memory using matrix descriptors" (the register form has no imm-trans-a operand). Shapes
// for .f16/.bf16 with .f32 d: .m64nNk16, N = 8, 16, ..., 256.
// Fragments ("Matrix Fragments for wgmma.mma_async.m64nNk16"): A in registers: four .f16x2
// registers a0..a7 per thread, warp w of the warpgroup holding rows 16w .. 16w + 15 laid out as
// the mma.m16n8k16 A fragment; D (.f32): N / 2 registers, d[4i + 2h + j] = D[16w + g + 8h][8i + 2t
// + j] (the m16n8 C fragment of each n8 slice i).
void wgmma_m64nNk16(Elem e, int n, const SharedWindow& smem, std::uint64_t desc_a,
                    const std::uint32_t (*a_regs)[4], bool tnsp_a, std::uint64_t desc_b,
                    bool tnsp_b, float* const (&d)[128], bool scale_d) {
  auto name = [&] {  // built only for a Fault's message
    const char* ty = e == Elem::f16 ? "f16" : "bf16";
    return "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." + ty + "." + ty;
  };
  if (n < 8 || n > 256 || n % 8 != 0)
    throw Fault("wgmma.mma_async m64nNk16 with .f32 accumulators: N must be 8, 16, ..., 256, got " +
                std::to_string(n));
  if (a_regs != nullptr && tnsp_a)
    throw Fault(name() +
                ": imm-trans-a = 1 with A in registers — the transpose exists only for "
                "operands read from shared memory through a matrix descriptor");
  for (int th = 0; th < 128; ++th)
    if (d[th] == nullptr)
      throw Fault(name() + ": thread " + std::to_string(th) + " has no accumulator registers");

  // On the heap: the emulator may call this from a fiber with a small stack.
  std::vector<float> a_mat(64 * 16), b_mat(16 * 256);
  auto Am = [&](int row, int k) -> float& { return a_mat[static_cast<std::size_t>(row) * 16 + k]; };
  auto Bm = [&](int k, int col) -> float& {
    return b_mat[static_cast<std::size_t>(k) * 256 + col];
  };

  if (a_regs != nullptr) {
    for (int th = 0; th < 128; ++th) {
      const int w = th / 32, g = (th % 32) >> 2, t = th % 4;
      for (int i = 0; i < 8; ++i) {
        const int row = 16 * w + (((i < 2) || (i >= 4 && i < 6)) ? g : g + 8);
        const int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        const std::uint32_t r = a_regs[th][i / 2];
        Am(row, col) = elem_to_float(e, (i & 1) ? hi16(r) : lo16(r));
      }
    }
  } else {
    const WgmmaDesc da = decode_wgmma_desc(desc_a);
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < 16; ++k) {
        const std::uint32_t p = wgmma_element_addr(da, tnsp_a, m, k);
        Am(m, k) = elem_to_float(e, load16(smem, p, [&] {
                                   return name() + ": A (desc_a " + hex(desc_a) + ", " +
                                          (tnsp_a ? "M-major" : "K-major") + ") element (m " +
                                          std::to_string(m) + ", k " + std::to_string(k) + ")";
                                 }));
      }
  }
  const WgmmaDesc db = decode_wgmma_desc(desc_b);
  for (int col = 0; col < n; ++col)
    for (int k = 0; k < 16; ++k) {
      const std::uint32_t p = wgmma_element_addr(db, tnsp_b, col, k);
      Bm(k, col) = elem_to_float(e, load16(smem, p, [&] {
                                   return name() + ": B (desc_b " + hex(desc_b) + ", " +
                                          (tnsp_b ? "N-major" : "K-major") + ") element (k " +
                                          std::to_string(k) + ", n " + std::to_string(col) + ")";
                                 }));
    }
  for (int th = 0; th < 128; ++th) {
    const int w = th / 32, g = (th % 32) >> 2, t = th % 4;
    for (int i = 0; i < n / 8; ++i)
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 2; ++j) {
          const int row = 16 * w + g + 8 * h, col = 8 * i + 2 * t + j;
          float& acc = d[th][4 * i + 2 * h + j];
          acc = dot16(scale_d ? acc : 0.0f, &Am(row, 0), &Bm(0, col), 256);
        }
  }
}

}  // namespace fsemu::model
