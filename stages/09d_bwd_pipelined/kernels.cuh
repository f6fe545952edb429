// stages/09d_bwd_pipelined/kernels.cuh — what the pipelined backward's kernels file exports to
// its launcher: the tile traits, the shared-memory opt-in and the enqueue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/stage.hpp"

namespace flashsteps::bwd_mma {

using SupportedHeadDims = HeadDims<64, 128>;

/// The tile of the pipelined kernel for dtype T at head dimension kD: stage 09c's tile (one block
/// per (head, K/V tile j) of Bc keys, walking the query tiles i of Br rows; five products on
/// mma.sync, each of the 4 warps owning 16 keys of K_j). New: Q_i, dO_i, LSE_i and D_i live in a
/// ring of kStages slots, tile i in slot i % kStages, filled by cp.async kStages tiles ahead
/// (kernels.cu, `ring`).
///
/// Shared memory (each row padded by 16 bytes, as in 09c):
///   K_j, V_j    (Bc, D + 8) dtype   the walk's constant tiles (cp.async, with tile 0's slot)
///   dSᵀ_ij      (Bc, Br + 8) dtype  the warps' dSᵀ strips, read back transposed for dQ
///   the ring    kStages x { Q_i, dO_i (Br, D + 8) dtype; LSE_i, D_i (Br) fp32 }
///
///   D    kStages  bytes              blocks per SM shared memory allows: sm_80  sm_86/89  sm_90
///   64   2        65536 (64 KiB)                                          2      1         3
///   128  2        75264 (73.5 KiB)                                        2      1         3
///   64   3        84480 (82.5 KiB)                                        1      1         2
///   (09c, one slot: 46592 (45.5 KiB) at D = 64, 57600 (56.25 KiB) at D = 128: 3, 2, 4 and 2, 1, 4)
/// Two slots: a tile's copy (Q_i and dO_i, 16 KiB at either head dim, from L2) is far shorter
/// than its 640 mma per warp, so a third slot would only cost a resident block per SM.
/// Registers per thread: 09c's budget (its 128 and 160 accumulators); the ring adds addresses.
//! [traits]
template <class T, int kD>
struct BwdMmaTraits {
  static constexpr int D = kD;
  static constexpr int kStages = 2;  // slots of the ring (tiles in flight + the one computed)
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
  static constexpr int kVec = 16 / kElem;            // elements per 16-byte cp.async
  // Shared memory, in bytes (every offset a multiple of 16): K_j, V_j, dSᵀ_ij, then the ring.
  static constexpr std::size_t kOffK = 0;                              // (Bc, kLd) T
  static constexpr std::size_t kOffV = kOffK + Bc * kLd * sizeof(T);   // (Bc, kLd) T
  static constexpr std::size_t kOffDS = kOffV + Bc * kLd * sizeof(T);  // (Bc, kLdDs) T
  static constexpr std::size_t kOffRing = kOffDS + Bc * kLdDs * sizeof(T);
  // One slot of the ring, offsets from its start.
  static constexpr std::size_t kOffQ = 0;                                 // (Br, kLd) T
  static constexpr std::size_t kOffDO = kOffQ + Br * kLd * sizeof(T);     // (Br, kLd) T
  static constexpr std::size_t kOffLse = kOffDO + Br * kLd * sizeof(T);   // (Br) fp32
  static constexpr std::size_t kOffDelta = kOffLse + Br * sizeof(float);  // (Br) fp32
  static constexpr std::size_t kSlotBytes = kOffDelta + Br * sizeof(float);
  static constexpr std::size_t kSmemBytes = kOffRing + kStages * kSlotBytes;

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
  static_assert(kOffV % 16 == 0 && kOffDS % 16 == 0 && kOffRing % 16 == 0 && kOffDO % 16 == 0 &&
                    kOffLse % 16 == 0 && kSlotBytes % 16 == 0,
                "16-byte aligned tiles and slots: cp.async writes 16-byte pieces");
  static_assert(kStages >= 2, "with one slot the next tile's copy could only start after this one");
  static_assert(kStages - 1 <= 8,
                "cuda::pipeline_consumer_wait_prior clamps its count at 8: a deeper ring would "
                "wait for copies it does not need yet");
  static_assert(D % kVec == 0 && (Br * D / kVec) % kThreads == 0 && (Bc * D / kVec) % kThreads == 0,
                "every thread copies the same number of 16-byte pieces of a tile");
  static_assert(Br <= kThreads, "one thread copies each row's LSE and D");
  static_assert(kSmemBytes <= 99 * 1024,
                "the ring fits the 99 KiB opt-in limit of sm_86/sm_89: every sm_80+ device runs "
                "both head dims with the same tile");
  static_assert(2 * kSmemBytes <= 164 * 1024 && 3 * kSmemBytes <= 228 * 1024,
                "the ring's budget: two blocks still fit an sm_80 SM (164 KiB) and three an sm_90 "
                "SM (228 KiB); a third slot would cost one of them (the table above)");
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
