// stages/06a_mma_sync/kernels.cuh — what the mma.sync stage's kernel file exports to its launcher:
// the tile traits (sizes, the shared-memory ring, the assumptions behind them), the tile
// configurations the launcher chooses from, and the kernel itself (struct Kernel: one variant per
// dtype, tile configuration and causal flag).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps::mma_sync {

/// Head dimensions the kernel is instantiated for.
using SupportedHeadDims = HeadDims<64, 128>;

/// Tiles of the mma.sync kernel for head dimension kD, kBc keys per tile and a ring of kStages
/// shared-memory stages: stage 04's tiles, shared-memory layout and table, unchanged. One thread
/// block owns one query block Q_i (Br rows) of one head and each of its 4 warps owns 16 of those
/// rows (mma's m) for the whole kernel; tile j of K and V lives in stage j % kStages of the ring.
///
/// Shared memory, in this order (each region starts on a 128-byte boundary):
///   Q      (Br, D)  fp16/bf16, row stride D + 8   — loaded once
///   ring   kStages x { K (Bc, D), V (Bc, D) }     — fp16/bf16, row stride D + 8
///   S      (Br, Bc) fp32,      row stride Bc + 4  — raw scores Q_i K_j^T
///   P      (Br, Bc) fp16/bf16, row stride Bc + 8  — exp2(...) rounded to the dtype
///   O      (Br, D)  fp32,      row stride D + 4   — the unnormalised output accumulator
/// The padding is stage 03's: it makes every row stride an odd multiple of 16 bytes (144, 272,
/// 528 bytes; 80 for P at Bc = 32), so 8 consecutive rows start in 8 different 16-byte (4-bank)
/// groups of the 128 bytes the 32 banks span, and the 8 row addresses of an ldmatrix phase hit
/// all 32 banks once. cp.async writes
/// and ldmatrix reads 16-byte pieces, which those strides keep aligned.
///
/// What the ring costs (bytes = fixed Q, S, P, O + kStages * (K + V)), against the per-block
/// opt-in limit: sm_86/sm_89 99 KiB (101376), sm_80 163 KiB (166912), sm_90 227 KiB (232448):
///
///   D    Bc  kStages   bytes             sm_86/89  sm_80  sm_90
///   64   64  2          90112 ( 88 KiB)  yes       yes    yes     <- D = 64 everywhere
///   64   64  3         108544 (106 KiB)  no        yes    yes
///   128  64  2         147456 (144 KiB)  no        yes    yes     <- D = 128 on sm_80, sm_90
///   128  64  3         182272 (178 KiB)  no        no     yes
///   128  32  2         100352 ( 98 KiB)  yes       yes    yes     <- D = 128 on sm_86, sm_89
///   (stage 03, one shared K/V buffer: 62464 (61 KiB) at D = 64, 95232 (93 KiB) at D = 128)
///
/// Why these three. Two stages already cover the copy: a tile's copy (~860-1,100 cycles for K_j and
/// V_j from L2, kernels.cu's header) is shorter than a tile's math (~2,000-3,100 cycles), so a
/// third stage would buy nothing but shared memory. D = 128 keeps stage 03's Bc = 64 wherever the
/// ring fits, because S_ij and O_i make their shared-memory round trips once per tile whatever Bc
/// is: halving Bc makes O's round trip cost twice as much per key (about +40% shared-memory traffic
/// per key at D = 128, by chapter 03's count). Only sm_86/sm_89, whose 99 KiB cannot hold that
/// ring, get Bc = 32, which keeps the contract (D = 128 on every sm_80+ device) at that price.
//! [traits]
template <int kD, int kBc, int kStages>
struct MmaSyncTraits {
  static constexpr int D = kD;
  static constexpr int Br = 64;           // query rows per thread block
  static constexpr int Bc = kBc;          // key/value rows per tile
  static constexpr int Stages = kStages;  // (K_j, V_j) pairs in the shared-memory ring
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = Br / kWarps;  // rows of Q_i one warp owns: 16
  static constexpr int kElem = 2;                // bytes of fp16 and bf16
  static constexpr int kVec = 16 / kElem;        // elements per 16-byte copy (one cp.async)

  // mma.m16n8k16 counts per warp (each warp: 16 rows).
  static constexpr int kQK = D / 16;   // k-steps of S = Q K^T = A fragments of the Q strip
  static constexpr int kSN = Bc / 8;   // n8 tiles of the S strip (16, Bc)
  static constexpr int kPK = Bc / 16;  // k-steps of O += P V = A fragments of the P strip
  static constexpr int kON = D / 8;    // n8 tiles of the O strip (16, D)

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
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffRing = kOffQ + kQBytes;  // stage s at kOffRing + s*kStageBytes
  static constexpr std::size_t kOffS = kOffRing + Stages * kStageBytes;
  static constexpr std::size_t kOffP = kOffS + kSBytes;
  static constexpr std::size_t kOffO = kOffP + kPBytes;
  /// Dynamic shared memory per block (the table above).
  static constexpr std::size_t kSmemBytes = kOffO + kOBytes;

  static_assert(D == 64 || D == 128, "stage 06a instantiates D = 64 and D = 128 only");
  static_assert(Bc == 32 || Bc == 64, "a warp's S strip is 4 or 8 n8 tiles wide");
  static_assert(Stages >= 2,
                "with one stage the copy of tile j+1 could only start after tile j's math");
  static_assert(Stages - 2 <= 8,
                "cuda::pipeline_consumer_wait_prior clamps its count at 8: a deeper ring would "
                "wait for copies it does not need yet");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(kWarpRows == 16, "each warp owns one m16 row strip of Q_i, S, P and O");
  static_assert(kWarpRows * 2 == 32,
                "the softmax gives each row of a warp's strip to a pair of lanes");
  static_assert(Bc % 16 == 0 && D % 16 == 0,
                "S and O strips are whole n8 tile pairs and whole k16 steps (ldmatrix.x4 loads "
                "two n8 tiles of K or V at a time)");
  static_assert(Bc % 2 == 0 && D % 2 == 0, "the two lanes of a row split its columns evenly");
  static_assert(D % kVec == 0, "rows are copied in 16-byte pieces");
  static_assert((Br * D / kVec) % kThreads == 0 && (Bc * D / kVec) % kThreads == 0,
                "every thread copies the same number of 16-byte pieces of a tile");
  static_assert((kWarpRows * D / kVec) % 32 == 0,
                "every lane stores the same number of 16-byte pieces of O (shuffles inside)");
  static_assert((kLdQ * kElem) % 16 == 0 && (kLdKV * kElem) % 16 == 0 && (kLdP * kElem) % 16 == 0 &&
                    (kLdS * 4) % 16 == 0 && (kLdO * 4) % 16 == 0,
                "ldmatrix rows and 16-byte cp.async pieces need row strides that are multiples "
                "of 16 bytes (and the 8-byte accumulator accesses of 8)");
  static_assert((kLdQ * kElem / 16) % 2 == 1 && (kLdKV * kElem / 16) % 2 == 1 &&
                    (kLdP * kElem / 16) % 2 == 1 && (kLdS * 4 / 16) % 2 == 1 &&
                    (kLdO * 4 / 16) % 2 == 1,
                "the padding makes every row stride an odd multiple of 16 bytes, which puts 8 "
                "consecutive rows in 8 different 4-bank groups");
  static_assert(kSmemBytes <= 227 * 1024,
                "no sm_80+ device holds more than 227 KiB of shared memory per block (sm_90)");
};
//! [traits]

//! [configs]
/// The tile configurations the launcher runs (the table above): D = 64 has one; D = 128 has the
/// stage-03 tile wherever its ring fits the device and a narrower one where it does not.
using TileD64 = MmaSyncTraits<64, 64, 2>;          //  88 KiB: every sm_80+ device
using TileD128 = MmaSyncTraits<128, 64, 2>;        // 144 KiB: sm_80, sm_90
using TileD128Narrow = MmaSyncTraits<128, 32, 2>;  //  98 KiB: sm_86, sm_89 (99 KiB opt-in)
//! [configs]
static_assert(TileD64::kSmemBytes <= 99 * 1024 && TileD128Narrow::kSmemBytes <= 99 * 1024,
              "D = 64 and the narrow D = 128 tile fit the 99 KiB opt-in limit of sm_86/sm_89, so "
              "every sm_80+ device runs D = 64 and D = 128");
static_assert(TileD128::kSmemBytes <= 163 * 1024,
              "the wide D = 128 tile fits A100's (sm_80) 163 KiB opt-in limit");

/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
FS_FUSED_KERNEL_EXPORTS(FusedKernel)

}  // namespace flashsteps::mma_sync
