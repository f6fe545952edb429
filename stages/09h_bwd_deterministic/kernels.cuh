// stages/09h_bwd_deterministic/kernels.cuh — what the deterministic backward's kernels file exports
// to its launcher: 09g's tile traits, the shared-memory opt-in and the enqueue.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/stage.hpp"

namespace flashsteps::bwd_dq_writer {

using SupportedHeadDims = HeadDims<64, 128>;

/// The tile of the TMA producer kernel for dtype T at head dimension kD: stage 09f's walk, products
/// and dQ writer (one math warpgroup per (head, K/V tile j) of Bc = 64 keys, walking the query
/// tiles i of Br = 64 rows; warp kWriterWarp of the second warpgroup adds dQ_i's partials with the
/// bulk reduce-add). New: warp kProducerWarp of the second warpgroup loads K_j, V_j once (kv_full)
/// and Q_i, dO_i, LSE_i, D_i by TMA into the ring of kStages slots, each slot guarded by full[s]
/// (expect_tx: its bytes have landed) and empty[s] (the math threads no longer read it).
///
/// Shared memory (offsets from a 1024-byte aligned base): 09f's, then
///   mbarriers   full[kStages], empty[kStages], kv_full after 09f's dq_full, dq_empty
///
///   D    bytes (with 1 KiB of alignment slack)   blocks per sm_90 SM (228 KiB)
///   64   93256 (91 KiB)                           2 (09f: 2)
///   128  142408 (139 KiB)                         1 (09f: 1)
/// Registers: 256 threads, two blocks per SM asked of ptxas (__launch_bounds__(256, 2)): 128 per
/// thread at launch; the writer's warpgroup gives back down to 24, the math warpgroup takes 232
/// (09e's math needed at most 228, D = 128 causal).
//! [traits]
template <class T, int kD>
struct BwdDqWriterTraits {
  static constexpr int D = kD;
  static constexpr int kStages = 2;  // slots of the ring (tiles in flight + the one computed)
  static constexpr int Br = 64;      // query rows per tile of the walk: wgmma's m for dQ_i
  static constexpr int Bc = 64;      // keys per block: wgmma's m for Sᵀ, dPᵀ, dK_j, dV_j
  static constexpr int kWarps = 4;   // warps of the math warpgroup
  static constexpr int kMathThreads = 32 * kWarps;
  // Warpgroup 0 computes, warpgroup 1 holds the TMA producer (its warp kProducerWarp) and the dQ
  // writer (its warp kWriterWarp). The math warpgroup comes first: its thread indices are 09e's.
  static constexpr int kThreads = 2 * kMathThreads;
  static constexpr int kProducerWarp = 0;    // in warpgroup 1, as FlashAttention-3's producer
  static constexpr int kWriterWarp = 1;      // in warpgroup 1, as FlashAttention-3's dQ writer
  static constexpr int kMinBlocksPerSm = 2;  // __launch_bounds__: 65,536 / (256 x 2) = 128 regs
  static constexpr int kLaunchRegs = 65536 / (kThreads * kMinBlocksPerSm);
  static constexpr int kWriterRegs = 24;         // setmaxnreg.dec: the writer warpgroup's count
  static constexpr int kMathRegs = 232;          // setmaxnreg.inc: the math warpgroup's count
  static constexpr int kDqBufs = 2;              // (Br, 64) fp32 buffers of dQ_i partials
  static constexpr int kWarpKeys = Bc / kWarps;  // accumulator rows one warp holds: 16
  // wgmma counts per tile (k16 steps).
  static constexpr int kDK = D / 16;  // Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: m64n{Br}k16, k = d
  static constexpr int kQN = Br / 8;  // n8 slices of the Sᵀ, Pᵀ, dPᵀ, dSᵀ accumulators (64, Br)
  static constexpr int kQK = Br / 16;  // dV_j += Pᵀ dO_i, dK_j += dSᵀ Q_i: m64n{D}k16, k = query
  static constexpr int kDN = D / 8;    // n8 slices of the dK_j, dV_j, dQ_i accumulators (64, D)
  static constexpr int kCK = Bc / 16;        // dQ_i += dS K_j: m64n64k16 per 64 columns, k = key
  static constexpr int kElem = 2;            // bytes of fp16 and bf16
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
  // dQ_i's partials, 64 columns at a time (one wgmma n = 64 accumulator): kDqBufs buffers, then
  // the mbarriers dq_full[kDqBufs] and dq_empty[kDqBufs].
  static constexpr std::size_t kDqBufBytes = std::size_t{Br} * kBlockCols * sizeof(float);
  static constexpr std::size_t kOffDQ = kOffRing + kStages * kSlotBytes;
  static constexpr std::size_t kOffBar = kOffDQ + kDqBufs * kDqBufBytes;
  // TMA's bytes per arrive.expect_tx: one ring slot (Q_i, dO_i, LSE_i, D_i; rows past Sq are
  // zero-filled and counted), and K_j with V_j (kv_full).
  static constexpr std::uint32_t kSlotTxBytes = 2 * Br * D * kElem + 2 * Br * sizeof(float);
  static constexpr std::uint32_t kKVTxBytes = 2 * Bc * D * kElem;
  // dq_full[kDqBufs], dq_empty[kDqBufs], full[kStages], empty[kStages], kv_full.
  static constexpr int kBars = 2 * kDqBufs + 2 * kStages + 1;
  static constexpr std::size_t kSmemBytes = kOffBar + kBars * sizeof(std::uint64_t) + kAlignSlack;

  static_assert(sizeof(T) == kElem, "wgmma here takes fp16 or bf16: 2-byte elements");
  static_assert(kMathThreads == 128 && Bc == 64 && Br == 64,
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
  static_assert(kOffLse % 128 == 0 && kOffDelta % 128 == 0,
                "LSE_i, D_i: TMA writes shared memory at 128-byte aligned addresses");
  static_assert(Br <= 256 && Bc <= 256, "a TMA box is at most 256 rows");
  static_assert(kSlotTxBytes == kOffDelta + Br * sizeof(float) - kOffQ,
                "expect_tx counts exactly the bytes TMA writes into a slot");
  static_assert(kKVBlockBytes / 16 < (1u << 14) && kQBlockBytes / 16 < (1u << 14),
                "an MN-major descriptor's leading byte offset (the next 64 columns) fits 14 bits");
  static_assert(kStages >= 2, "with one slot the next tile's copy could only start after this one");
  static_assert(kSmemBytes <= 227 * 1024, "fits sm_90's 227 KiB opt-in limit");
  static_assert(D == 128 || kMinBlocksPerSm * kSmemBytes <= 228 * 1024,
                "at D = 64 two blocks fit an sm_90 SM (at D = 128 shared memory allows one)");
  static_assert(kWriterWarp >= 0 && kWriterWarp < 4 && kProducerWarp >= 0 && kProducerWarp < 4 &&
                    kProducerWarp != kWriterWarp,
                "the producer and the writer are two warps of warpgroup 1");
  static_assert(kLaunchRegs % 8 == 0 && kWriterRegs <= kLaunchRegs && kMathRegs >= kLaunchRegs,
                "setmaxnreg: the writer's warpgroup gives back (.dec), the math one takes (.inc)");
  static_assert(kMathThreads * (kWriterRegs + kMathRegs) <= kThreads * kLaunchRegs,
                "the math warpgroup takes only what the writer's gave back: the block's "
                "registers at launch (65,536 per SM / kMinBlocksPerSm)");
  static_assert(kMathRegs <= 255 && kMathRegs % 8 == 0, "setmaxnreg: 24..256, a multiple of 8");
  static_assert(kDqBufBytes % 16 == 0 && kOffDQ % 16 == 0 && (Br * D) % 4 == 0,
                "the bulk reduce-add moves multiples of 16 bytes between 16-byte aligned "
                "addresses (the accumulator's tiles of Br x D floats keep that alignment)");
  static_assert(kOffBar % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(kDqBufs >= 1 && D / kBlockCols <= 2 * kDqBufs,
                "a tile's partials (D / 64 of them) use each buffer at most twice");
};
//! [traits]

/// Launch parameters shared by the kernels (64-bit: B*H*Sq*D overflows 32 bits at large shapes).
struct Shape {
  std::int64_t bh, sq, skv;
  float scale;
};

/// The workspace: dQ's fp32 accumulator, [B*H, ceil(Sq/Br)] tiles of Br x D floats each (one tile
/// the partials of one query tile, in the order dq_offset() gives), then D = rowsum(dO ∘ O) and a
/// copy of LSE, fp32 [B*H, ceil(Sq/Br)·Br] each (0 past Sq): rows of whole tiles for TMA; then the
/// deterministic mode's semaphores, int [B*H, ceil(Sq/Br)].
std::int64_t workspace_bytes(const Shape& shape, std::int64_t head_dim);

/// Raises the fused kernel's dynamic shared-memory limit to what it uses (cudaFuncSetAttribute),
/// for every variant; outside any timed region.
void configure_kernels();

/// Enqueues D (and the zeroed accumulator and semaphores), the fused kernel — with the
/// deterministic mode when args.deterministic — and dQ's conversion on `stream`.
template <class T, int kD, bool kCausal>
void enqueue(const Shape& shape, const AttentionArgs& args, cudaStream_t stream);

/// The kernels as launched for `shape`.
template <class T, int kD, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape& shape);

}  // namespace flashsteps::bwd_dq_writer
