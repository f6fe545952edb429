// stages/06b_registers/kernels.cuh — what the register-resident stage's kernel file exports to its
// launcher: the tile traits (sizes, the padded shared-memory ring, the assumptions behind them),
// the tile each head dim runs, and the kernel itself (struct Kernel: one variant per dtype, tile
// and causal flag).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps::registers_padded {

/// Head dimensions the kernel is instantiated for.
using SupportedHeadDims = HeadDims<64, 128>;

/// Tiles of the register-resident kernel for head dimension kD, kBc keys per tile and a ring of
/// kStages shared-memory stages. As in stages 04 and 06a, one thread block owns one query block Q_i
/// (Br = 64 rows) of one head and each of its 4 warps owns 16 of those rows for the whole kernel.
/// New: S_ij, P_ij and O_i never touch shared memory — they live in the warp's registers, in the
/// mma.m16n8k16 fragment layouts (kernels.cu has the pictures) — and so does the warp's Q strip,
/// loaded once. Shared memory holds only what several warps read: the K_j / V_j ring.
///
/// Shared memory, in this order (each region starts on a 128-byte boundary):
///   Q      (Br, D) fp16/bf16, row stride D + 8 — copied once, read once into registers; reused
///                                                at the end to stage O for 16-byte stores
///   ring   kStages x { K (Bc, D), V (Bc, D) }    — fp16/bf16, row stride D + 8
/// The padding is stage 04's (and 06a's): every row stride an odd multiple of 16 bytes, so the 8
/// rows an ldmatrix phase reads sit in 8 different 4-bank groups.
///
///   D    Bc   kStages  bytes           sm_86/89 (99 KiB)  sm_80 (163 KiB)  sm_90 (227 KiB)
///   64   64   2         46080 (45 KiB) yes, 2 blocks/SM   yes, 3/SM        yes, 4/SM   <- D = 64
///   128  64   2         87040 (85 KiB) yes, 1 block/SM    yes, 1/SM        yes, 2/SM   <- D = 128
///   (blocks per SM that shared memory allows: 100 / 164 / 228 KiB per SM, with 1 KiB the runtime
///   reserves per block; the registers allow fewer, see kernels.cu's header)
///   (stage 06a: 88 KiB at D = 64; 144 KiB at D = 128, 98 KiB with Bc = 32 on sm_86/89)
/// Both tiles fit every sm_80+ device, so unlike stage 06a there is no per-device tile choice: the
/// narrow tile existed for the S, P and O tiles that shared memory no longer holds.
/// Bc = 64 is 06a's. In registers, the S strip costs Bc/2 fp32 registers per thread, the O strip
/// D/2 and Q's fragments D/4: 32 + 32 + 16 at D = 64, 32 + 64 + 32 at D = 128 (stage 06c doubles Bc
/// at D = 64, where the register file has room). Two stages, as in 06a: a tile's copy is shorter
/// than a tile's math, so a third stage would only take shared memory.
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
  static constexpr int kLdQ = D + 8;   // Q tile, dtype (at the end: O / l, staged)
  static constexpr int kLdKV = D + 8;  // K / V tiles, dtype

  static constexpr std::size_t align128(std::size_t b) { return (b + 127) / 128 * 128; }
  static constexpr std::size_t kQBytes = align128(std::size_t{Br} * kLdQ * kElem);
  static constexpr std::size_t kKVBytes = align128(std::size_t{Bc} * kLdKV * kElem);  // K or V
  static constexpr std::size_t kStageBytes = 2 * kKVBytes;  // one stage: K_j then V_j
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffRing = kOffQ + kQBytes;  // stage s at kOffRing + s*kStageBytes
  /// Dynamic shared memory per block (the table above).
  static constexpr std::size_t kSmemBytes = kOffRing + Stages * kStageBytes;

  static_assert(D == 64 || D == 128, "stage 06b instantiates D = 64 and D = 128 only");
  static_assert(Bc == 32 || Bc == 64, "a warp's S strip is 4 or 8 n8 tiles wide");
  static_assert(Stages >= 2,
                "with one stage the copy of tile j+1 could only start after tile j's math");
  static_assert(Stages - 2 <= 8,
                "cuda::pipeline_consumer_wait_prior clamps its count at 8: a deeper ring would "
                "wait for copies it does not need yet");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(kWarpRows == 16, "each warp owns one m16 row strip of Q_i, S, P and O");
  static_assert(Bc % 16 == 0 && D % 16 == 0,
                "S and O strips are whole n8 tile pairs and whole k16 steps (ldmatrix.x4 loads "
                "two n8 tiles of K or V at a time)");
  static_assert(D % kVec == 0, "rows are copied in 16-byte pieces");
  static_assert((Br * D / kVec) % kThreads == 0 && (Bc * D / kVec) % kThreads == 0,
                "every thread copies the same number of 16-byte pieces of a tile");
  static_assert((kWarpRows * D / kVec) % 32 == 0,
                "every lane stores the same number of 16-byte pieces of O");
  static_assert((kLdQ * kElem) % 16 == 0 && (kLdKV * kElem) % 16 == 0,
                "ldmatrix rows and 16-byte cp.async pieces need row strides that are multiples "
                "of 16 bytes");
  static_assert((kLdQ * kElem / 16) % 2 == 1 && (kLdKV * kElem / 16) % 2 == 1,
                "the padding makes every row stride an odd multiple of 16 bytes, which puts 8 "
                "consecutive rows in 8 different 4-bank groups");
  static_assert(kSmemBytes <= 227 * 1024,
                "no sm_80+ device holds more than 227 KiB of shared memory per block (sm_90)");
};
//! [traits]

//! [configs]
using TileD64 = MmaSyncTraits<64, 64, 2>;    // 45 KiB
using TileD128 = MmaSyncTraits<128, 64, 2>;  // 85 KiB
/// The tile head dim kD runs.
template <int kD>
using TileFor = std::conditional_t<kD == 64, TileD64, TileD128>;
//! [configs]
static_assert(TileD64::Br == TileD128::Br, "Tr is computed once for every head dim");
static_assert(TileD64::kSmemBytes <= 99 * 1024 && TileD128::kSmemBytes <= 99 * 1024,
              "D = 64 and D = 128 fit the 99 KiB opt-in limit of sm_86/sm_89, so every sm_80+ "
              "device runs both with the same tile");

/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
FS_FUSED_KERNEL_EXPORTS(FusedKernel)

}  // namespace flashsteps::registers_padded
