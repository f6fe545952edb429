// stages/08a_intra_overlap/kernels.cuh — what the Hopper stage's kernel file exports to its
// launcher: the tile traits (sizes, warpgroup roles and register budgets, the TMA ring, the
// assumptions behind them), the tile each head dim runs, and the kernel itself (struct Kernel: one
// variant per dtype, tile and causal flag).
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps::hopper {

/// Head dimensions the kernel is instantiated for.
using SupportedHeadDims = HeadDims<64, 128>;

/// Tiles of the Hopper kernel for head dimension kD, kBc keys per tile and a ring of kStages
/// shared-memory stages. One thread block owns one query block Q_i of Br = 128 rows of one head,
/// and runs three warpgroups (4 consecutive warps each, starting at warp 0, 4, 8):
///
///   warpgroup 0  producer   one thread issues every TMA copy (Q_i once, then K_j, V_j into the
///                           ring); the warpgroup drops to kProducerRegs registers per thread
///   warpgroup 1  consumer 0 owns Q_i rows  0 .. 63: S, P, O strips (64, *) in its registers
///   warpgroup 2  consumer 1 owns Q_i rows 64 .. 127
///
/// Shared memory (offsets from a 1024-byte aligned base; every region a whole number of 1 KiB
/// swizzle atoms, as TMA's 128-byte swizzle and the wgmma descriptors need):
///   Q      (Br, D)  as D/64 column blocks (Br, 64), each row 128 B, 128B-swizzled (TMA); reused
///                   at the end to stage O_i / l for the TMA store
///   K ring kStages x (Bc, D) as D/64 column blocks (Bc, 64), 128B-swizzled
///   V ring kStages x (Bc, D) likewise
///   bars   q_full, k_full[kStages], v_full[kStages], empty[kStages]: 8-byte mbarriers
///   anchor one fp32 word per consumer thread (1 KiB), written each tile, never read (kernels.cu)
///
///   D    Bc   kStages  bytes                        sm_90 opt-in (227 KiB = 232,448 B)
///   64   128  4        16 K + 4 x 32 K + 2,152 =  149,608 B   yes, 1 block/SM (registers: 1)
///   128  128  3        32 K + 3 x 64 K + 2,128 =  231,504 B   yes, 1 block/SM (944 B spare)
/// Why: a consumer warpgroup holds S (64, Bc) fp32 = Bc/2 registers per thread, P (64, Bc) 16-bit
/// = Bc/4 and O (64, D) fp32 = D/2: 64 + 32 + 64 = 160 at D = 128, Bc = 128 — inside the 240 that
/// setmaxnreg gives a consumer. Bc = 128 is also wgmma's sweet spot (m64n128k16 for S). The ring
/// is as deep as shared memory allows: three stages at D = 128 (FA3 uses two with Bc = 176), four
/// at D = 64 (more would not be waited on: the producer is 1-2 tiles ahead at steady state).
//! [traits]
template <int kD, int kBc, int kStages>
struct HopperTraits {
  static constexpr int D = kD;
  static constexpr int Br = 128;          // query rows per thread block (2 consumer warpgroups)
  static constexpr int Bc = kBc;          // key/value rows per tile
  static constexpr int Stages = kStages;  // (K_j, V_j) pairs in the ring
  static constexpr int kWarpgroupThreads = 128;
  static constexpr int kConsumers = 2;                                   // consumer warpgroups
  static constexpr int kConsumerRows = Br / kConsumers;                  // 64: wgmma's m
  static constexpr int kThreads = (1 + kConsumers) * kWarpgroupThreads;  // 384
  static constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
  // setmaxnreg budgets (FA3's): the block starts with 65,536 / 384 -> 168 per thread (ptxas's cap
  // from __launch_bounds__(384, 1)); the producer gives back down to 24, each consumer takes 240.
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr int kElem = 2;  // bytes of fp16 and bf16
  static constexpr int kSwizzleBytes = 128;
  static constexpr int kBlockCols = kSwizzleBytes / kElem;  // 64 columns per 128-byte swizzled row
  static constexpr int kColBlocks = D / kBlockCols;         // column blocks of Q, K, V, O
  static constexpr int kAtomBytes = 8 * kSwizzleBytes;      // 1024: one swizzle atom (8 rows)

  // wgmma counts per consumer warpgroup and tile.
  static constexpr int kQK = D / 16;     // m64n{Bc}k16 for S = Q K^T
  static constexpr int kPV = Bc / 16;    // m64n{D}k16 for O += P V (A = P from registers)
  static constexpr int kSRegs = Bc / 2;  // S accumulator (64, Bc) fp32, per thread
  static constexpr int kORegs = D / 2;   // O accumulator (64, D) fp32, per thread

  static constexpr std::size_t kQBytes = std::size_t{Br} * D * kElem;
  static constexpr std::size_t kQBlockBytes = std::size_t{Br} * kSwizzleBytes;  // one col block
  static constexpr std::size_t kKVBytes = std::size_t{Bc} * D * kElem;          // K_j or V_j
  static constexpr std::size_t kKVBlockBytes = std::size_t{Bc} * kSwizzleBytes;
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffK = kOffQ + kQBytes;            // stage s: + s * kKVBytes
  static constexpr std::size_t kOffV = kOffK + Stages * kKVBytes;  // stage s: + s * kKVBytes
  static constexpr std::size_t kOffBar = kOffV + Stages * kKVBytes;
  static constexpr int kBarriers = 1 + 3 * Stages;  // q_full, k_full[], v_full[], empty[]
  static constexpr std::size_t kBarBytes = kBarriers * sizeof(std::uint64_t);
  /// One fp32 word per consumer thread, written once per tile and never read: the store that
  /// holds the wait for P V below the softmax in the compiled code (kernels.cu, "anchor").
  static constexpr std::size_t kOffAnchor = kOffBar + kBarBytes;
  static constexpr std::size_t kAnchorBytes = std::size_t{kConsumerThreads} * sizeof(float);
  /// The runtime does not promise more than 16-byte alignment of dynamic shared memory; the kernel
  /// rounds its base up to 1024 and reserves the slack.
  static constexpr std::size_t kAlignSlack = 1024;
  /// Dynamic shared memory per block (the table above).
  static constexpr std::size_t kSmemBytes = kOffAnchor + kAnchorBytes + kAlignSlack;

  static_assert(D == 64 || D == 128, "stage 08a instantiates D = 64 and D = 128 only");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(kConsumerRows == 64, "a consumer warpgroup owns one wgmma m64 strip of Q_i");
  static_assert(kThreads == 384, "one producer and two consumer warpgroups");
  static_assert(D % kBlockCols == 0,
                "TMA's 128B swizzle copies boxes at most 128 bytes wide: D is whole 64-column "
                "blocks");
  static_assert(Bc == 128, "S = Q K^T is one m64n128k16 wgmma per k16 step (ptx.cuh has n128)");
  static_assert(D == 64 || D == 128, "O += P V is m64n64k16 or m64n128k16 (ptx.cuh has both)");
  static_assert(Bc <= 256 && Br / kConsumers <= 256, "a TMA box has at most 256 rows");
  static_assert(kQBlockBytes % kAtomBytes == 0 && kKVBlockBytes % kAtomBytes == 0 &&
                    (std::size_t{kConsumerRows} * kSwizzleBytes) % kAtomBytes == 0,
                "every column block and every consumer's half of Q starts on a 1024-byte swizzle "
                "atom: the wgmma descriptors' base offset field stays 0");
  static_assert(kKVBlockBytes / 16 < (1u << 14),
                "the V descriptor's leading byte offset (next 64 columns) fits 14 bits of 16 B");
  static_assert(kKVBytes < (1u << 20),
                "mbarrier expect_tx counts at most 2^20 - 1 bytes per phase");
  static_assert(Stages >= 2, "with one stage the copy of K_{j+1} could only start after tile j");
  static_assert(kProducerRegs * kWarpgroupThreads + kConsumerRegs * kConsumerThreads <= 65536,
                "the setmaxnreg budgets must fit the SM's 64 K registers (one block per SM)");
  static_assert(kSmemBytes <= 227 * 1024, "fits sm_90's 227 KiB opt-in limit");
};
//! [traits]

//! [configs]
using TileD64 = HopperTraits<64, 128, 4>;    // 145 KiB
using TileD128 = HopperTraits<128, 128, 3>;  // 225 KiB
/// The tile head dim kD runs.
template <int kD>
using TileFor = std::conditional_t<kD == 64, TileD64, TileD128>;
//! [configs]
static_assert(TileD64::Br == TileD128::Br, "Tr is computed once for every head dim");

/// The kernel's signature: the four tensor maps the launcher encodes (Q, K, V, O), LSE, the shape.
template <class T, class Shape>
using TensorMapKernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, float*, Shape);

/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
FS_FUSED_KERNEL_EXPORTS(TensorMapKernel)

}  // namespace flashsteps::hopper
