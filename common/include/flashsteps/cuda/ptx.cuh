// flashsteps/cuda/ptx.cuh — the inline PTX this project writes by hand, in one place.
//
// DESIGN.md: prefer CCCL where it covers an instruction (cuda::memcpy_async / cuda::pipeline emit
// cp.async, cuda::ptx emits mbarrier, cp.async.bulk, ...). CCCL has no wrapper for the warp-level
// tensor-core instructions of sm_80 — mma.sync and ldmatrix — so they are written here, each with
// the section of the PTX ISA it implements (section numbers as in the PTX ISA 8.5 manual; later
// manuals may renumber, the titles stay). Every wrapper is warp-collective and `.aligned`: all 32
// lanes of the warp must execute it, under uniform control flow.
//
// Register layouts (PTX ISA 9.7.14.5.8, "Matrix Fragments for mma.m16n8k16 with floating point
// type"), with lane = 4 * g + t (g = groupID = lane / 4 in 0..7, t = threadID_in_group = lane % 4).
// A .f16x2 / .bf16x2 register holds two adjacent elements, the lower column (A, C) or the lower k
// (B) in its low 16 bits.
//
//   A (16 x 16, row-major), 4 x .b32:    B (16 x 8, "col" = K x N), 2 x .b32:
//            k: 0..7      8..15                   n: 0..7
//   rows 0-7   a0 (2t,2t+1) a2              k 0-7   b0 = (k 2t, 2t+1; n g)
//   rows 8-15  a1           a3              k 8-15  b1
//     a0 = A[g][2t..2t+1]   a1 = A[g+8][2t..2t+1]
//     a2 = A[g][2t+8..+9]   a3 = A[g+8][2t+8..+9]
//
//   C / D (16 x 8, fp32), 4 x .f32:
//     c0, c1 = C[g][2t], C[g][2t+1]         c2, c3 = C[g+8][2t], C[g+8][2t+1]
//
// ldmatrix .x4 (PTX ISA 9.7.14.5.15): lanes 8m .. 8m+7 each give the address of one 16-byte row of
// 8x8 matrix m (m = 0..3); destination register m of lane 4g + t then holds row g, elements 2t and
// 2t+1 of matrix m — exactly the per-8x8 piece of the A, B and C layouts above. With .trans, it
// holds column g, elements 2t and 2t+1 (rows 2t, 2t+1) of matrix m instead: the B layout, read
// from a matrix stored k-major (rows = k), as V is.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace flashsteps::ptx {

//! [ptx]
/// The 32-bit shared-state-space address of a generic pointer into shared memory: what the
/// `.shared` forms of ldmatrix take (cvta.to.shared, through the CUDA builtin; no inline PTX).
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// PTX ISA 9.7.14.5.15, "Warp-level matrix load instruction: ldmatrix":
///   ldmatrix.sync.aligned.m8n8.x4.shared.b16 {r0, r1, r2, r3}, [addr];
/// Four 8x8 matrices of 16-bit elements. Lane 8m + i passes the address of row i of matrix m
/// (16 contiguous bytes, 16-byte aligned); r[m] receives row lane/4, elements 2*(lane%4) and
/// 2*(lane%4)+1 of matrix m.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// PTX ISA 9.7.14.5.15, "Warp-level matrix load instruction: ldmatrix", with .trans:
///   ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {r0, r1, r2, r3}, [addr];
/// The same addresses; r[m] receives the transposed piece: column lane/4, rows 2*(lane%4) and
/// 2*(lane%4)+1 of matrix m. Loads a B operand from a (k, n) row-major tile (V) without a
/// transpose in memory.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// PTX ISA 9.7.14.5.14, "Multiply-and-Accumulate Instruction: mma" (fragments: 9.7.14.5.8):
///   mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32   d, a, b, c;   (T = __half)
///   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c;   (T = __nv_bfloat16)
/// acc (16 x 8, fp32) += a (16 x 16, T) * b (16 x 8, T), in place (d and c are the same
/// registers). Layouts: the picture at the top of this file.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&acc)[4], const std::uint32_t (&a)[4],
                                             const std::uint32_t (&b)[2]) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>,
                "mma.m16n8k16 with fp32 accumulation takes fp16 or bf16 operands");
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

/// PTX ISA 9.7.3.21, "Floating Point Instructions: ex2":  ex2.approx.ftz.f32 d, a;
/// 2^a in one MUFU.EX2, subnormal results flushed to +0 (ex2(-inf) = +0). The CUDA exp2f() without
/// --use_fast_math wraps the same instruction in a compare and two multiplies to keep subnormal
/// results; a softmax weight below 2^-126 next to the row maximum's weight of 1 is lost in the fp32
/// sum anyway. (CCCL's cuda::ptx has no ex2.)
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
//! [ptx]

/// Two fp32 values rounded to T and packed into one .f16x2 / .bf16x2 register, `lo` in the low
/// half: the element with the lower column index, as the fragment layouts above want it.
/// (Not PTX: cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32 through the CUDA intrinsics.)
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);  // .x = lo, .y = hi: one cvt.rn.f16x2.f32
    return std::uint32_t{__half_as_ushort(h.x)} | (std::uint32_t{__half_as_ushort(h.y)} << 16);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // one cvt.rn.bf16x2.f32
    return std::uint32_t{__bfloat16_as_ushort(h.x)} |
           (std::uint32_t{__bfloat16_as_ushort(h.y)} << 16);
  }
}

}  // namespace flashsteps::ptx
