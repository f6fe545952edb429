// stages/09e_bwd_wgmma/kernels.cuh — what the wgmma backward's kernels file exports to its
// launcher: the tile traits, the shared-memory opt-in and the enqueue.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/stage.hpp"

namespace flashsteps::bwd_wgmma {

using SupportedHeadDims = HeadDims<64, 128>;

/// The tile of the wgmma kernel for dtype T at head dimension kD: stage 09d's walk (one block per
/// (head, K/V tile j) of Bc keys, walking the query tiles i of Br rows, Q_i, dO_i, LSE_i, D_i in a
/// ring of kStages cp.async slots). New: the block is one warpgroup (128 threads) and the five
/// products are wgmma.mma_async m64nNk16 (sm_90a), whose m = 64 is both Bc (Sᵀ, dPᵀ, dV_j, dK_j:
/// keys as m) and Br (dQ_i: queries as m). So Br = Bc = 64 at both head dims.
///
/// Shared memory (offsets from a 1024-byte aligned base; every tile in 128B-swizzled (rows, 64)
/// column blocks of 128-byte rows, 07a's layout, which the wgmma descriptors read):
///   K_j, V_j    (Bc, D) dtype            the walk's constant tiles
///   dS_ij       (Br, Bc) dtype           dS (queries as rows), dQ's K-major A operand
///   the ring    kStages x { Q_i, dO_i (Br, D) dtype; LSE_i, D_i (Br) fp32 }, slots 1 KiB aligned
///
///   D    kStages  bytes (with 1 KiB of alignment slack)   blocks per sm_90 SM (228 KiB)
///   64   2        60416 (59 KiB)                          3
///   128  2        109568 (107 KiB)                        2
/// Registers per thread (fp32 accumulators, wgmma's layout): Sᵀ and dPᵀ Br/2 each, dK_j and dV_j
/// D/2 each, dQ_i D/2 (live after Sᵀ, dPᵀ have become the register operands Pᵀ, dSᵀ): at D = 128
/// at most 64 + 64 + 64 + 32 (Pᵀ, dSᵀ) live at once, under the 255 of a 128-thread block.
//! [traits]
template <class T, int kD>
struct BwdWgmmaTraits {
  static constexpr int D = kD;
  static constexpr int kStages = 2;  // slots of the ring (tiles in flight + the one computed)
  static constexpr int Br = 64;      // query rows per tile of the walk: wgmma's m for dQ_i
  static constexpr int Bc = 64;      // keys per block: wgmma's m for Sᵀ, dPᵀ, dK_j, dV_j
  static constexpr int kWarps = 4;   // one warpgroup
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpKeys = Bc / kWarps;  // accumulator rows one warp holds: 16
  // wgmma counts per tile (k16 steps).
  static constexpr int kDK = D / 16;  // Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: m64n{Br}k16, k = d
  static constexpr int kQN = Br / 8;  // n8 slices of the Sᵀ, Pᵀ, dPᵀ, dSᵀ accumulators (64, Br)
  static constexpr int kQK = Br / 16;  // dV_j += Pᵀ dO_i, dK_j += dSᵀ Q_i: m64n{D}k16, k = query
  static constexpr int kDN = D / 8;    // n8 slices of the dK_j, dV_j, dQ_i accumulators (64, D)
  static constexpr int kCK = Bc / 16;        // dQ_i += dS K_j: m64n64k16 per 64 columns, k = key
  static constexpr int kElem = 2;            // bytes of fp16 and bf16
  static constexpr int kVec = 16 / kElem;    // elements per 16-byte cp.async
  static constexpr int kSwizzleBytes = 128;  // one swizzled row of a column block
  static constexpr int kBlockCols = kSwizzleBytes / kElem;  // 64 columns per column block
  static constexpr int kAtomBytes = 8 * kSwizzleBytes;      // 1024: one swizzle atom (8 rows)
  // Shared memory, in bytes from the 1024-aligned base: K_j, V_j, dS_ij, then the ring.
  static constexpr std::size_t kKVBlockBytes = std::size_t{Bc} * kSwizzleBytes;  // (Bc, 64)
  static constexpr std::size_t kQBlockBytes = std::size_t{Br} * kSwizzleBytes;   // (Br, 64)
  static constexpr std::size_t kOffK = 0;                                        // (Bc, D) T
  static constexpr std::size_t kOffV = kOffK + std::size_t{Bc} * D * kElem;      // (Bc, D) T
  static constexpr std::size_t kOffDS = kOffV + std::size_t{Bc} * D * kElem;     // (Br, Bc) T
  static constexpr std::size_t kOffRing = kOffDS + std::size_t{Br} * Bc * kElem;
  // One slot of the ring, offsets from its start.
  static constexpr std::size_t kOffQ = 0;                                       // (Br, D) T
  static constexpr std::size_t kOffDO = kOffQ + std::size_t{Br} * D * kElem;    // (Br, D) T
  static constexpr std::size_t kOffLse = kOffDO + std::size_t{Br} * D * kElem;  // (Br) fp32
  static constexpr std::size_t kOffDelta = kOffLse + Br * sizeof(float);        // (Br) fp32
  static constexpr std::size_t kSlotBytes =
      (kOffDelta + Br * sizeof(float) + kAtomBytes - 1) / kAtomBytes * kAtomBytes;
  /// The runtime promises 16-byte alignment of dynamic shared memory; the kernel rounds its base
  /// up to 1024 and reserves the slack (as 07a).
  static constexpr std::size_t kAlignSlack = 1024;
  static constexpr std::size_t kSmemBytes = kOffRing + kStages * kSlotBytes + kAlignSlack;

  static_assert(sizeof(T) == kElem, "wgmma here takes fp16 or bf16: 2-byte elements");
  static_assert(kThreads == 128 && Bc == 64 && Br == 64,
                "the block is one warpgroup: wgmma's m = 64 is the keys of K_j (Sᵀ, dPᵀ, dK_j, "
                "dV_j) and the queries of Q_i (dQ_i)");
  static_assert(kWarpKeys == 16, "warp w holds accumulator rows 16w .. 16w + 15 (ptx.cuh)");
  static_assert(D == 64 || D == 128,
                "dK_j, dV_j are m64n64k16 or m64n128k16 with register A (ptx.cuh has both)");
  static_assert(Bc * kElem == kSwizzleBytes,
                "dS_ij's rows (Bc keys) are one 128-byte swizzled row: dQ's A operand is one "
                "column block, and a k16 step of it is +32 bytes");
  static_assert(D % kBlockCols == 0, "Q_i, dO_i, K_j, V_j are whole 64-column blocks");
  static_assert(kKVBlockBytes % kAtomBytes == 0 && kQBlockBytes % kAtomBytes == 0 &&
                    kOffV % kAtomBytes == 0 && kOffDS % kAtomBytes == 0 &&
                    kOffRing % kAtomBytes == 0 && kOffDO % kAtomBytes == 0 &&
                    kSlotBytes % kAtomBytes == 0,
                "every column block starts on a 1024-byte swizzle atom: the descriptors' base "
                "offset field stays 0");
  static_assert(kOffLse % 16 == 0, "LSE_i, D_i: 4-byte cp.async into 16-byte aligned rows");
  static_assert(kKVBlockBytes / 16 < (1u << 14) && kQBlockBytes / 16 < (1u << 14),
                "an MN-major descriptor's leading byte offset (the next 64 columns) fits 14 bits");
  static_assert(kStages >= 2, "with one slot the next tile's copy could only start after this one");
  static_assert(kStages - 1 <= 8,
                "cuda::pipeline_consumer_wait_prior clamps its count at 8: a deeper ring would "
                "wait for copies it does not need yet");
  static_assert(D % kVec == 0 && (Br * D / kVec) % kThreads == 0 && (Bc * D / kVec) % kThreads == 0,
                "every thread copies the same number of 16-byte pieces of a tile");
  static_assert(Br <= kThreads, "one thread copies each row's LSE and D");
  static_assert(kSmemBytes <= 227 * 1024, "fits sm_90's 227 KiB opt-in limit");
  static_assert(2 * kSmemBytes <= 228 * 1024, "two blocks fit an sm_90 SM at either head dim");
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

}  // namespace flashsteps::bwd_wgmma
