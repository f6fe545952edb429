// stages/09c_bwd_mma/kernels.cuh — what the tensor-core backward's kernels file exports to
// its launcher: the tile traits, the shared-memory opt-in and the enqueue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/stage.hpp"

namespace flashsteps::bwd_mma {

using SupportedHeadDims = HeadDims<64, 128>;

/// The tile of the tensor-core kernel for dtype T at head dimension kD: one block per (head, K/V
/// tile j) of Bc keys, walking the query tiles i of Br rows, as in stage 09b. New: the five
/// products run on mma.sync m16n8k16 (fp32 accumulate), and each of the 4 warps owns 16 keys of K_j
/// — the m of every mma that makes a key-indexed result (Sᵀ, dPᵀ, dK_j, dV_j). The fragment
/// pictures and which operand is transposed where: kernels.cu.
///
/// Shared memory (each row padded by 16 bytes: the 8 rows an ldmatrix phase reads are 4 banks
/// apart, so every phase is conflict-free):
///   K_j, V_j    (Bc, D + 8) dtype   the walk's constant tiles
///   Q_i, dO_i   (Br, D + 8) dtype   per query tile (Br = 64 at D = 64, 32 at D = 128)
///   dSᵀ_ij      (Bc, Br + 8) dtype  the warps' dSᵀ strips, read back transposed for dQ
///   LSE_i, D_i  (Br) fp32
///
///   D    bytes              blocks per SM shared memory allows: sm_80   sm_86/89   sm_90
///   64   46592 (45.5 KiB)                                        3       2          4
///   128  57600 (56.25 KiB)                                       2       1          4
/// Registers per thread, the budget the tile is sized to: dK_j and dV_j strips (16, D) fp32 are
/// D/2 + D/2 = D, the Sᵀ and dPᵀ strips (16, Br) fp32 Br/2 + Br/2, together 128 (D = 64, Br = 64)
/// and 160 (D = 128, Br = 32) of the 255 a thread may have (128 threads); the
/// build's ptxas report (resources/09c_bwd_mma.ptxas.txt) says what ptxas made of it.
//! [traits]
template <class T, int kD>
struct BwdMmaTraits {
  static constexpr int D = kD;
  // Query rows per tile of the walk (Q_i, dO_i, LSE_i, D_i): 64 at D = 64, 32 at D = 128, where
  // the (16, D) strips of dK_j and dV_j take 128 of the registers and Br = 64 spills.
  static constexpr int Br = kD == 64 ? 64 : 32;
  static constexpr int Bc = 64;  // keys per block: K_j, V_j, dK_j, dV_j
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpKeys = Bc / kWarps;  // keys of K_j one warp owns: 16 = mma's m
  static constexpr int kLd = D + 8;              // K_j, V_j, Q_i, dO_i rows: 16 bytes of padding
  static constexpr int kLdDs = Br + 8;           // dSᵀ_ij rows (Bc of them): the same padding
  // mma.m16n8k16 counts per warp.
  static constexpr int kDK = D / 16;  // k-steps of Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ (k = d)
  static constexpr int kQN = Br / 8;   // n8 tiles of the Sᵀ, Pᵀ, dPᵀ, dSᵀ strips (16, Br)
  static constexpr int kQK = Br / 16;  // k-steps of dV_j += Pᵀ dO_i, dK_j += dSᵀ Q_i (k = query)
  static constexpr int kDN = D / 8;    // n8 tiles of the dK_j, dV_j strips (16, D)
  static constexpr int kCK = Bc / 16;  // k-steps of dQ_i += dS K_j (k = key)
  // dQ_i (Br, D): warp w computes query rows 16 (w % kDqRows) .. +15, columns kDqCols · (w /
  // kDqRows) .. + kDqCols - 1.
  static constexpr int kDqRows = Br / 16;            // 16-row strips of dQ_i
  static constexpr int kDqSplit = kWarps / kDqRows;  // column blocks per strip
  static constexpr int kDqCols = D / kDqSplit;       // columns of one warp's dQ piece
  static constexpr int kDqN = kDqCols / 8;           // its n8 tiles
  static constexpr int kElem = 2;                    // bytes of fp16 and bf16
  // Shared memory, in bytes (every offset a multiple of 16).
  static constexpr std::size_t kOffK = 0;                                  // (Bc, kLd) T
  static constexpr std::size_t kOffV = kOffK + Bc * kLd * sizeof(T);       // (Bc, kLd) T
  static constexpr std::size_t kOffQ = kOffV + Bc * kLd * sizeof(T);       // (Br, kLd) T
  static constexpr std::size_t kOffDO = kOffQ + Br * kLd * sizeof(T);      // (Br, kLd) T
  static constexpr std::size_t kOffDS = kOffDO + Br * kLd * sizeof(T);     // (Bc, kLdDs) T
  static constexpr std::size_t kOffLse = kOffDS + Bc * kLdDs * sizeof(T);  // (Br) fp32
  static constexpr std::size_t kOffDelta = kOffLse + Br * sizeof(float);   // (Br) fp32
  static constexpr std::size_t kSmemBytes = kOffDelta + Br * sizeof(float);

  static_assert(sizeof(T) == kElem, "mma.m16n8k16 here takes fp16 or bf16: 2-byte elements");
  static_assert(kWarpKeys == 16, "each warp owns one m16 strip of keys: Sᵀ, dPᵀ, dK_j, dV_j");
  static_assert(D % 16 == 0 && Br % 16 == 0 && Bc % 16 == 0,
                "whole k16 steps and n8 tile pairs (ldmatrix.x4 loads two n8 tiles at a time)");
  static_assert(kWarps % kDqRows == 0 && D % (16 * kDqSplit) == 0,
                "the warps cover dQ_i in whole 16-row strips and whole n8 tile pairs");
  static_assert((kLd * sizeof(T)) % 16 == 0 && (kLdDs * sizeof(T)) % 16 == 0,
                "ldmatrix rows start 16-byte aligned");
  static_assert((kLd * sizeof(T)) % 32 == 16 && (kLdDs * sizeof(T)) % 32 == 16,
                "rows an odd number of 16-byte chunks apart: the 8 rows of an ldmatrix phase fall "
                "in 8 different 4-bank groups");
  static_assert(kOffV % 16 == 0 && kOffQ % 16 == 0 && kOffDO % 16 == 0 && kOffDS % 16 == 0 &&
                    kOffLse % 16 == 0,
                "16-byte aligned tiles");
  static_assert(kSmemBytes <= 99 * 1024,
                "fits the 99 KiB opt-in limit of sm_86/sm_89: every sm_80+ device runs both head "
                "dims with the same tile");
};
//! [traits]

/// Launch parameters shared by the kernels (64-bit: B*H*Sq*D overflows 32 bits at large shapes).
struct Shape {
  std::int64_t bh, sq, skv;
  float scale;
};

/// The workspace: dQ's fp32 accumulator [B*H, Sq, D], then D = rowsum(dO ∘ O), fp32 [B*H, Sq].
std::int64_t workspace_bytes(const Shape& shape, std::int64_t head_dim);

/// Raises the fused kernel's dynamic shared-memory limit to what it uses (cudaFuncSetAttribute),
/// for every variant; outside any timed region.
void configure_kernels();

/// Enqueues D (and the zeroed accumulator), the fused kernel and dQ's conversion on `stream`.
template <class T, int kD, bool kCausal>
void enqueue(const Shape& shape, const AttentionArgs& args, cudaStream_t stream);

/// The kernels as launched for `shape`.
template <class T, int kD, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape& shape);

}  // namespace flashsteps::bwd_mma
