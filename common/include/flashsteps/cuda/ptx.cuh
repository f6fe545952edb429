// flashsteps/cuda/ptx.cuh — the inline PTX this project writes by hand, in one place.
//
// The rule (CONTRIBUTING.md): prefer CCCL where it covers an instruction (cuda::memcpy_async /
// cuda::pipeline emit cp.async, cuda::ptx emits mbarrier, cp.async.bulk, ...). CCCL has no wrapper
// for the warp-level tensor-core instructions of sm_80 — mma.sync and ldmatrix — so they are
// written here, each with the section of the PTX ISA it implements (section numbers as in the PTX
// ISA 8.5 manual; later manuals may renumber, the titles stay). Every wrapper is warp-collective
// and `.aligned`: all 32 lanes of the warp must execute it, under uniform control flow.
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

#if defined(FLASHSTEPS_EMULATE)
#include "fsemu/ptx.hpp"  // the CPU emulator's instruction models (emu/README.md)
#endif

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
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::ldmatrix(4, false, r, addr);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

/// PTX ISA 9.7.14.5.15, "Warp-level matrix load instruction: ldmatrix", with .trans:
///   ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {r0, r1, r2, r3}, [addr];
/// The same addresses; r[m] receives the transposed piece: column lane/4, rows 2*(lane%4) and
/// 2*(lane%4)+1 of matrix m. Loads a B operand from a (k, n) row-major tile (V) without a
/// transpose in memory.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::ldmatrix(4, true, r, addr);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
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
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::mma_m16n8k16(std::is_same_v<T, __nv_bfloat16>, acc, a, b);
#else
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
#endif
}

/// PTX ISA 9.7.3.21, "Floating Point Instructions: ex2":  ex2.approx.ftz.f32 d, a;
/// 2^a in one MUFU.EX2, subnormal results flushed to +0 (ex2(-inf) = +0). The CUDA exp2f() without
/// --use_fast_math wraps the same instruction in a compare and two multiplies to keep subnormal
/// results; a softmax weight below 2^-126 next to the row maximum's weight of 1 is lost in the fp32
/// sum anyway. (CCCL's cuda::ptx has no ex2.)
__device__ __forceinline__ float ex2_approx_ftz(float x) {
#if defined(FLASHSTEPS_EMULATE)
  return fsemu::ptx::ex2_approx_ftz(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}
//! [ptx]

// =================================================================================================
// Hopper (sm_90a) — stages 07a-08c. CCCL's cuda::ptx covers TMA (cp.async.bulk.tensor), the
// mbarrier expect_tx / try_wait.parity forms and the proxy fences, which they call directly. The
// CCCL of CUDA 13.0 has no wrapper for wgmma.*, for setmaxnreg (later CCCLs have one) nor for a
// named barrier with a thread count: those are below. Section numbers as in the PTX ISA 8.5 manual
// (9.7.15 is "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions").
//
// wgmma.* exists only for the arch-specific target sm_90a (not sm_90, and no later GPU: the
// datacenter Blackwells, sm_100a/103a/110a, multiply with tcgen05 instead, and sm_120/121 have
// neither). setmaxnreg is arch-specific too, but not Hopper's alone: its Target ISA Notes
// ("setmaxnreg", 9.7.17.1) list sm_90a, sm_100a, sm_103a, sm_110a, sm_120a, sm_121a and their
// family targets. Here both serve sm_90a. This
// header is also included by translation units compiled for sm_80/89, so every such asm body is
// inside `#if defined(__CUDA_ARCH_FEAT_SM90_ALL)` (nvcc defines it for compute_90a only); elsewhere
// the wrapper compiles to a trap, and stages that are not built for 90a never call it.
//
// Warpgroup accumulator layout (9.7.15.5.1, "Register Fragments", m64nNk16 with .f32 d): warp
// w = (thread % 128) / 32 of the warpgroup owns rows 16w .. 16w + 15; inside them, each n8 slice i
// (columns 8i .. 8i+7) is laid out exactly like the mma.m16n8k16 C tile at the top of this file:
//   d[4i + 0], d[4i + 1] = D[16w + g][8i + 2t], D[16w + g][8i + 2t + 1]
//   d[4i + 2], d[4i + 3] = D[16w + g + 8][8i + 2t], D[16w + g + 8][8i + 2t + 1]
// and a register A operand (k16) is, per warp, the mma.m16n8k16 A fragment (a0..a3) of its 16
// rows. That is why 06b's "the S accumulator is the P·V A operand" trick carries over as is.
// =================================================================================================

//! [ptx_hopper]
/// PTX ISA 9.7.15.5.1, "Matrix Descriptor Format" (Asynchronous Warpgroup Level Matrix Shared
/// Memory Layout: Matrix Descriptor). The 64-bit descriptor of a wgmma operand tile in shared
/// memory, for the 128-byte swizzle mode:
///   bits  0-13  start address >> 4          (shared-state-space byte address)
///   bits 16-29  leading-dimension byte offset >> 4  (LBO)
///   bits 32-45  stride-dimension byte offset >> 4   (SBO)
///   bits 49-51  base offset = 0             (every swizzle atom here is 1024-byte aligned)
///   bits 62-63  swizzle mode: 1 = 128B      (0 none, 2 = 64B, 3 = 32B)
/// With 128B swizzle, an "atom" is 8 rows x 128 bytes (1024 B) whose 16-byte chunks are permuted
/// chunk ^= row % 8 — the layout TMA's CU_TENSOR_MAP_SWIZZLE_128B writes. The swizzle is applied
/// to absolute address bits 4-6 from bits 7-9, so a start address inside an atom (the +32 B per
/// k16 step of a K-major operand) addresses the right chunks as long as the atom is 1024-aligned.
///   K-major  (rows = M or N, 64 contiguous k per 128-byte row): SBO = 1024 (next 8 rows); LBO
///            unused (a k16 step never leaves the 128-byte row).
///   MN-major (rows = k, 64 contiguous m/n per 128-byte row): SBO = 1024 (next 8 k-rows); LBO =
///            the byte distance to the next 64 m/n columns (the next 128-byte-wide column block).
__device__ __forceinline__ std::uint64_t wgmma_desc_sw128(std::uint32_t smem_byte_addr,
                                                          std::uint32_t lbo_bytes,
                                                          std::uint32_t sbo_bytes) {
  return (std::uint64_t{(smem_byte_addr & 0x3FFFFu) >> 4}) |
         (std::uint64_t{(lbo_bytes & 0x3FFFFu) >> 4} << 16) |
         (std::uint64_t{(sbo_bytes & 0x3FFFFu) >> 4} << 32) | (std::uint64_t{1} << 62);
}

/// PTX ISA 9.7.15.6.1 (8.5 numbering; 9.7.15.7.1 in 9.1), "Asynchronous Multiply-and-Accumulate
/// Instruction: wgmma.fence":  wgmma.fence.sync.aligned;
/// Orders registers, not memory: the ISA's one-line summary is "an ordering of register accesses
/// between wgmma.mma_async and other operations", and only two kinds of register need it, the
/// accumulator and the registers holding a register A operand. Required before the first
/// wgmma.mma_async of the warpgroup, and between any ordinary access (read or write) of such a
/// register and a later wgmma.mma_async that uses it as accumulator or A; accumulator accesses
/// between wgmmas of the same shape are ordered without it. Shared-memory operands are not its
/// business: the same section says that an async proxy fence orders earlier writes of those
/// matrices before a wgmma's reads (fence.proxy.async after ordinary stores or cp.async; what a
/// TMA copy wrote is already async-proxy data, ordered by the wait on its mbarrier).
__device__ __forceinline__ void wgmma_fence() {
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::wgmma_fence();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

/// PTX ISA 9.7.15.6.2, "wgmma.commit_group":  wgmma.commit_group.sync.aligned;
/// Closes a group of this warpgroup's outstanding wgmma.mma_async operations.
__device__ __forceinline__ void wgmma_commit_group() {
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::wgmma_commit_group();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

/// PTX ISA 9.7.15.6.3, "wgmma.wait_group":  wgmma.wait_group.sync.aligned N;
/// Waits until at most kN of this warpgroup's committed groups are still pending; only then are
/// their accumulators readable and their register / shared-memory operands free to be rewritten.
/// The "+f" operands of the wgmma wrappers keep the compiler from moving accumulator reads above
/// this point only because the asm is volatile and clobbers memory; callers pass the accumulator
/// through wgmma_fence_operand() after the wait to pin that order for registers too.
template <int kN>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(kN >= 0 && kN <= 7, "wgmma.wait_group takes an immediate 0..7");
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::wgmma_wait_group(kN);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kN) : "memory");
#else
  __trap();
#endif
}

/// Not an instruction: an empty asm that "reads and writes" every register of an accumulator, so
/// the compiler can neither read it before a wgmma_wait_group() nor write it after a wgmma_fence()
/// out of program order (CUTLASS's warpgroup_fence_operand).
template <int kN>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
#if defined(FLASHSTEPS_EMULATE)
    (void)d[i];
#else
    asm volatile("" : "+f"(d[i])::"memory");
#endif
}
template <int kN>
__device__ __forceinline__ void wgmma_fence_operand(std::uint32_t (&r)[kN][4]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
#if defined(FLASHSTEPS_EMULATE)
      (void)r[i][e];
#else
      asm volatile("" : "+r"(r[i][e])::"memory");
#endif
}

/// PTX ISA 9.7.15.5.2, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate: wgmma.mma_async",
/// both operands from shared memory (descriptors):
///   wgmma.mma_async.sync.aligned.m64n128k16.f32.{f16,bf16}.{f16,bf16} d, a-desc, b-desc, p, 1, 1,
///   0, 0;
/// d (64 x 128, fp32, 64 registers per thread in the accumulator layout) = A (64 x 16) * B^T
/// (B stored 128 x 16, K-major) + (scale_d ? d : 0). imm-tnsp-a = imm-tnsp-b = 0: both K-major.
/// Warpgroup-collective and asynchronous: d is not valid until wgmma_wait_group() says so.
template <class T>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], std::uint64_t desc_a,
                                                    std::uint64_t desc_b, int scale_d) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>,
                "wgmma with fp32 accumulation takes fp16 or bf16 operands here");
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::wgmma(std::is_same_v<T, __nv_bfloat16>, 128, d, desc_a, nullptr, desc_b, false,
                    scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FS_WGMMA_SS(TY)                                                                            \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY                                     \
      " "                                                                                          \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "     \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
      "%55, %56, %57, %58, %59, %60, %61, %62, %63}, "                                             \
      "%64, %65, p, 1, 1, 0, 0;\n}\n"                                                              \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
        "+f"(d[63])                                                                                \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))
  if constexpr (std::is_same_v<T, __half>) {
    FS_WGMMA_SS("f16");
  } else {
    FS_WGMMA_SS("bf16");
  }
#undef FS_WGMMA_SS
#else
  (void)d, (void)desc_a, (void)desc_b, (void)scale_d;
  __trap();  // sm_90a only
#endif
}

/// PTX ISA 9.7.15.5.2, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate: wgmma.mma_async",
/// A from registers, B from shared memory stored MN-major (imm-tnsp-b = 1):
///   wgmma.mma_async.sync.aligned.m64n64k16.f32.{f16,bf16}.{f16,bf16} d, {a0..a3}, b-desc, p, 1, 1,
///   1;
/// d (64 x 64, fp32, 32 registers) += A (64 x 16, registers: warp w of the warpgroup holds rows
/// 16w..16w+15 in the mma.m16n8k16 A layout at the top of this file) * B (16 x 64, stored k rows of
/// 64 contiguous elements: "transposed", MN-major). scale_d = 0 ignores the old d.
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const std::uint32_t (&a)[4],
                                                   std::uint64_t desc_b, int scale_d) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>,
                "wgmma with fp32 accumulation takes fp16 or bf16 operands here");
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::wgmma(std::is_same_v<T, __nv_bfloat16>, 64, d, 0, a, desc_b, true, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FS_WGMMA_RS(TY)                                                                            \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY                                      \
      " "                                                                                          \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "     \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                         \
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                                \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
  if constexpr (std::is_same_v<T, __half>) {
    FS_WGMMA_RS("f16");
  } else {
    FS_WGMMA_RS("bf16");
  }
#undef FS_WGMMA_RS
#else
  (void)d, (void)a, (void)desc_b, (void)scale_d;
  __trap();  // sm_90a only
#endif
}

/// PTX ISA 9.7.15.5.2, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate: wgmma.mma_async",
/// A from registers, B from shared memory stored MN-major (imm-tnsp-b = 1):
///   wgmma.mma_async.sync.aligned.m64n128k16.f32.{f16,bf16}.{f16,bf16} d, {a0..a3}, b-desc, p, 1,
///   1, 1;
/// d (64 x 128, fp32, 64 registers) += A (64 x 16, registers: warp w of the warpgroup holds rows
/// 16w..16w+15 in the mma.m16n8k16 A layout at the top of this file) * B (16 x 128, stored k rows
/// of 128 contiguous elements: "transposed", MN-major). scale_d = 0 ignores the old d.
template <class T>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const std::uint32_t (&a)[4],
                                                    std::uint64_t desc_b, int scale_d) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>,
                "wgmma with fp32 accumulation takes fp16 or bf16 operands here");
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::wgmma(std::is_same_v<T, __nv_bfloat16>, 128, d, 0, a, desc_b, true, scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FS_WGMMA_RS(TY)                                                                            \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY                                     \
      " "                                                                                          \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "     \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
      "%55, %56, %57, %58, %59, %60, %61, %62, %63}, "                                             \
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                                \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
        "+f"(d[63])                                                                                \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
  if constexpr (std::is_same_v<T, __half>) {
    FS_WGMMA_RS("f16");
  } else {
    FS_WGMMA_RS("bf16");
  }
#undef FS_WGMMA_RS
#else
  (void)d, (void)a, (void)desc_b, (void)scale_d;
  __trap();  // sm_90a only
#endif
}

/// PTX ISA 9.7.17.1 (8.5 numbering), "setmaxnreg":  setmaxnreg.inc.sync.aligned.u32 kRegs;
/// Raises this warp's per-thread register limit to kRegs (a multiple of 8 in 24..256), taking the
/// registers from the block's pool (blocks until the pool has them). Every warp of a warpgroup must
/// execute the same setmaxnreg. It takes effect only in a kernel launched with a register cap
/// (__launch_bounds__(threads, 1)); ptxas then allocates the code after it against kRegs.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::setmaxnreg(true, kRegs);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#else
  __trap();
#endif
}

/// PTX ISA 9.7.17.1, "setmaxnreg":  setmaxnreg.dec.sync.aligned.u32 kRegs;
/// Lowers this warp's per-thread register limit to kRegs and returns the rest to the block's pool.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::setmaxnreg(false, kRegs);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#else
  __trap();
#endif
}

/// PTX ISA 9.7.12.1 (8.5 numbering), "bar, barrier":  bar.sync id, n;  (barrier.sync.aligned)
/// Named barrier `id` (1..15; 0 is __syncthreads()) completes when n threads (a multiple of 32)
/// have arrived with bar.sync or bar.arrive; the bar.sync callers wait for that. (sm_70+; CUDA
/// has no intrinsic that takes the thread count.)
__device__ __forceinline__ void named_barrier_sync(int id, int n) {
#if defined(FLASHSTEPS_EMULATE)
  fsemu::bar_sync(id, n, "bar.sync (named barrier)");
#else
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
#endif
}

/// PTX ISA 9.7.12.1, "bar, barrier":  bar.arrive id, n;
/// Counts this warp's threads as arrived at named barrier `id` without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int n) {
#if defined(FLASHSTEPS_EMULATE)
  fsemu::bar_arrive(id, n, "bar.arrive (named barrier)");
#else
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
#endif
}
//! [ptx_hopper]

}  // namespace flashsteps::ptx
