// stages/05_warp_specialized/kernels.cuh — what the warp-specialized stage's kernel file exports to
// its launcher: the tile traits (sizes, roles, the shared-memory ring and its barriers, the
// assumptions behind them), the tile configurations the launcher chooses from, and the kernel
// itself (struct Kernel: one variant per dtype, tile configuration and causal flag).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps::warp_specialized {

/// Head dimensions the kernel is instantiated for.
using SupportedHeadDims = HeadDims<64, 128>;

/// Tiles and roles of the warp-specialized kernel: head dimension kD, kBc keys per tile, a ring of
/// kStages shared-memory stages and kProducerWarps producer warps. As in stages 03 and 04, one
/// thread block owns one query block Q_i (Br rows) of one head. New: the block has two kinds of
/// warps. The kConsumerWarps = 4 consumer warps each own 16 rows of Q_i for the whole kernel and
/// only compute (stage 04's math, unchanged); the producer warps only copy K_j, V_j into the ring.
/// Each stage of the ring has two barriers in shared memory: full[s] (the producers' copies into
/// stage s have landed) and empty[s] (every consumer thread is done reading stage s).
///
/// Shared memory, in this order (each region starts on a 128-byte boundary):
///   Q      (Br, D)  fp16/bf16, row stride D + 8   — each consumer warp copies its own 16 rows
///   ring   kStages x { K (Bc, D), V (Bc, D) }     — fp16/bf16, row stride D + 8
///   S      (Br, Bc) fp32,      row stride Bc + 4  — raw scores Q_i K_j^T
///   P      (Br, Bc) fp16/bf16, row stride Bc + 8  — exp2(...) rounded to the dtype
///   O      (Br, D)  fp32,      row stride D + 4   — the unnormalised output accumulator
///   bars   full[kStages], empty[kStages]          — cuda::barrier<thread_scope_block>, 8 B each
/// The padding is stage 03's: every row stride is an odd multiple of 16 bytes, so 8 consecutive
/// rows start in 8 different 4-bank groups and WMMA fragment accesses hit all 32 banks once.
///
/// What it costs: stage 04's ring plus 128 bytes of barriers, against the per-block opt-in limit
/// (sm_86/sm_89 99 KiB = 101376, sm_80 163 KiB = 166912, sm_90 227 KiB = 232448):
///
///   D    Bc  kStages   bytes             sm_86/89  sm_80  sm_90
///   64   64  2          90240 ( 88 KiB)  yes       yes    yes     <- D = 64 everywhere
///   128  64  2         147584 (144 KiB)  no        yes    yes     <- D = 128 on sm_80, sm_90
///   128  32  2         100480 ( 98 KiB)  yes       yes    yes     <- D = 128 on sm_86, sm_89
///
/// The same three tiles as stage 04, for its reasons (two stages cover a copy shorter than a tile's
/// math; Bc = 32 only where the Bc = 64 ring does not fit), so that the two stages differ only in
/// who copies and how the handoff is synchronized. The producer warp adds 32 threads (160 per
/// block) and no shared memory beyond the barriers; at <= 96 registers per thread (the ptxas
/// report) the register file holds 4 blocks of 160 threads, more than shared memory allows, so
/// blocks per SM are stage 04's.
//! [traits]
template <int kD, int kBc, int kStages, int kProducerWarps = 1>
struct WarpSpecializedTraits {
  static constexpr int D = kD;
  static constexpr int Br = 64;           // query rows per thread block
  static constexpr int Bc = kBc;          // key/value rows per tile
  static constexpr int Stages = kStages;  // (K_j, V_j) pairs in the shared-memory ring
  static constexpr int kConsumerWarps = 4;
  static constexpr int kProducers = kProducerWarps;
  static constexpr int kConsumerThreads = 32 * kConsumerWarps;
  static constexpr int kProducerThreads = 32 * kProducerWarps;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;  // consumers are warps 0..3
  static constexpr int kWarpRows = Br / kConsumerWarps;  // rows of Q_i one consumer warp owns: 16
  static constexpr int kFrag = 16;                       // WMMA tile: m = n = k = 16
  static constexpr int kElem = 2;                        // bytes of fp16 and bf16
  static constexpr int kVec = 16 / kElem;                // elements per 16-byte copy (one cp.async)

  // Row strides in elements (padded, see above).
  static constexpr int kLdQ = D + 8;   // Q tile, dtype
  static constexpr int kLdKV = D + 8;  // K / V tiles, dtype
  static constexpr int kLdS = Bc + 4;  // S tile, fp32
  static constexpr int kLdP = Bc + 8;  // P tile, dtype
  static constexpr int kLdO = D + 4;   // O accumulator, fp32

  static constexpr std::size_t align128(std::size_t b) { return (b + 127) / 128 * 128; }
  static constexpr std::size_t kQBytes = align128(std::size_t{Br} * kLdQ * kElem);
  static constexpr std::size_t kKVBytes = align128(std::size_t{Bc} * kLdKV * kElem);  // K or V
  static constexpr std::size_t kStageBytes = 2 * kKVBytes;  // one stage: K_j then V_j
  static constexpr std::size_t kSBytes = align128(std::size_t{Br} * kLdS * 4);
  static constexpr std::size_t kPBytes = align128(std::size_t{Br} * kLdP * kElem);
  static constexpr std::size_t kOBytes = align128(std::size_t{Br} * kLdO * 4);
  // Bytes per barrier: an mbarrier is 8 (kernels.cu checks sizeof(cuda::barrier) against it).
  static constexpr std::size_t kBarrierSlot = 8;
  static constexpr std::size_t kBarBytes = align128(2 * Stages * kBarrierSlot);
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffRing = kOffQ + kQBytes;  // stage s at kOffRing + s*kStageBytes
  static constexpr std::size_t kOffS = kOffRing + Stages * kStageBytes;
  static constexpr std::size_t kOffP = kOffS + kSBytes;
  static constexpr std::size_t kOffO = kOffP + kPBytes;
  static constexpr std::size_t kOffFull = kOffO + kOBytes;  // full[s] at kOffFull + s*kBarrierSlot
  static constexpr std::size_t kOffEmpty = kOffFull + Stages * kBarrierSlot;
  /// Dynamic shared memory per block (the table above).
  static constexpr std::size_t kSmemBytes = kOffFull + kBarBytes;

  static_assert(D == 64 || D == 128, "stage 05 instantiates D = 64 and D = 128 only");
  static_assert(Bc == 32 || Bc == 64, "a warp's S strip is 2 or 4 WMMA tiles wide");
  static_assert(Stages >= 2,
                "with one stage the producer could copy tile j+1 only after the consumers "
                "released tile j: no overlap");
  static_assert(kProducerWarps >= 1, "someone has to copy K and V");
  static_assert(kThreads <= 1024, "a thread block holds at most 1024 threads");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(Br % (kConsumerWarps * kFrag) == 0 && kWarpRows == kFrag,
                "each consumer warp owns exactly one 16-row WMMA strip of Q_i, S, P and O");
  static_assert(kWarpRows * 2 == 32,
                "the softmax gives each row of a warp's strip to a pair of lanes");
  static_assert(Bc % kFrag == 0 && D % kFrag == 0, "S and O tiles are whole 16x16 fragments");
  static_assert(Bc % 2 == 0 && D % 2 == 0, "the two lanes of a row split its columns evenly");
  static_assert(D % kVec == 0, "rows are copied in 16-byte pieces");
  static_assert((Bc * D / kVec) % kProducerThreads == 0,
                "every producer thread copies the same number of 16-byte pieces of a K/V tile");
  static_assert((kWarpRows * D / kVec) % 32 == 0,
                "every lane of a consumer warp copies (Q) and stores (O) the same number of "
                "16-byte pieces of its strip");
  static_assert((kLdQ * kElem) % 16 == 0 && (kLdKV * kElem) % 16 == 0 && (kLdP * kElem) % 16 == 0 &&
                    (kLdS * 4) % 16 == 0 && (kLdO * 4) % 16 == 0,
                "WMMA strides and 16-byte cp.async pieces need row strides that are multiples of "
                "16 bytes");
  static_assert(
      (kFrag * kLdQ * kElem) % 32 == 0 && (kFrag * kLdKV * kElem) % 32 == 0 &&
          (kFrag * kLdP * kElem) % 32 == 0 && (kFrag * kLdS * 4) % 32 == 0 &&
          (kFrag * kLdO * 4) % 32 == 0,
      "WMMA fragment pointers (every 16th row, every 16th column) must be 32-byte aligned");
  static_assert((kLdQ * kElem / 16) % 2 == 1 && (kLdKV * kElem / 16) % 2 == 1 &&
                    (kLdP * kElem / 16) % 2 == 1 && (kLdS * 4 / 16) % 2 == 1 &&
                    (kLdO * 4 / 16) % 2 == 1,
                "the padding makes every row stride an odd multiple of 16 bytes, which puts 8 "
                "consecutive rows in 8 different 4-bank groups");
  static_assert(kOffFull % 8 == 0 && kBarrierSlot % 8 == 0, "an mbarrier is 8-byte aligned");
  static_assert(kSmemBytes <= 227 * 1024,
                "no sm_80+ device holds more than 227 KiB of shared memory per block (sm_90)");
};
//! [traits]

//! [configs]
/// The tile configurations the launcher runs (the table above): D = 64 has one; D = 128 has the
/// stage-03 tile wherever its ring fits the device and a narrower one where it does not.
using TileD64 = WarpSpecializedTraits<64, 64, 2>;          //  88 KiB: every sm_80+ device
using TileD128 = WarpSpecializedTraits<128, 64, 2>;        // 144 KiB: sm_80, sm_90
using TileD128Narrow = WarpSpecializedTraits<128, 32, 2>;  //  98 KiB: sm_86, sm_89
//! [configs]
static_assert(TileD64::kSmemBytes <= 99 * 1024 && TileD128Narrow::kSmemBytes <= 99 * 1024,
              "D = 64 and the narrow D = 128 tile fit the 99 KiB opt-in limit of sm_86/sm_89, so "
              "every sm_80+ device runs D = 64 and D = 128");
static_assert(TileD128::kSmemBytes <= 163 * 1024,
              "the wide D = 128 tile fits A100's (sm_80) 163 KiB opt-in limit");

/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
FS_FUSED_KERNEL_EXPORTS(FusedKernel)

}  // namespace flashsteps::warp_specialized
