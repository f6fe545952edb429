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
/// Shared memory, in this order (each region a whole number of 128-byte lines):
///   Q      (Br, D) fp16/bf16, row stride D + 8 — copied once, read once into registers; reused
///                                                at the end to stage O for 16-byte stores
///   ring   kStages x { K (Bc, D), V (Bc, D) }    — fp16/bf16, row stride D + 8
/// The padding is stage 04's (and 06a's): every row stride an odd multiple of 16 bytes, so the 8
/// rows an ldmatrix phase reads sit in 8 different 4-bank groups (kernels.cu, at padded()).
///
///   D    Bc   kStages  bytes           sm_86/89 (99 KiB)  sm_80 (163 KiB)  sm_90 (227 KiB)
///   64   128  2         82944 (81 KiB) yes, 1 block/SM    yes, 2/SM*       yes, 2/SM   <- D = 64
///   128  64   2         87040 (85 KiB) yes, 1 block/SM    yes, 1/SM        yes, 2/SM   <- D = 128
///   (blocks per SM: shared memory per SM, 100 / 164 / 228 KiB, with 1 KiB the runtime reserves
///   per block; * exactly 164 KiB. Registers hold 2 at most, see kMinBlocksPerSm.)
///   (stage 06a: 88 KiB at D = 64; 144 KiB at D = 128, 98 KiB with Bc = 32 on sm_86/89)
/// Both tiles fit every sm_80+ device, so unlike stage 06a there is no per-device tile choice.
/// Why these: the S strip costs Bc/2 fp32 registers per thread and the O strip D/2, so Bc * D is
/// what the register file can hold next to Q's D/4: Bc = 128 at D = 64 (64 + 32 + 16 registers),
/// Bc = 64 at D = 128 (32 + 64 + 32). Two stages: a tile's copy (~1,000 cycles from L2) is shorter
/// than a tile's math (~1,300 cycles per block with the blocks an SM holds, see kernels.cu), so a
/// third stage would only take shared memory — and at D = 128 on A100, the second block.
//! [traits]
template <int kD, int kBc, int kStages>
struct RegistersTraits {
  static constexpr int D = kD;
  static constexpr int Br = 64;           // query rows per thread block
  static constexpr int Bc = kBc;          // key/value rows per tile
  static constexpr int Stages = kStages;  // (K_j, V_j) pairs in the shared-memory ring
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = Br / kWarps;  // rows of Q_i one warp owns: 16 = mma's m
  static constexpr int kElem = 2;                // bytes of fp16 and bf16
  static constexpr int kVec = 16 / kElem;   // elements per 16-byte chunk (cp.async, ldmatrix row)
  static constexpr int kChunks = D / kVec;  // 16-byte chunks per row of Q, K, V, O
  static constexpr int kLd = D + kVec;      // row stride of Q, K, V in elements (padded)

  // mma.m16n8k16 counts per warp (each warp: 16 rows).
  static constexpr int kQK = D / 16;   // k-steps of S = Q K^T = A fragments of the Q strip
  static constexpr int kSN = Bc / 8;   // n8 tiles of the S strip (16, Bc)
  static constexpr int kPK = Bc / 16;  // k-steps of O += P V = A fragments of the P strip
  static constexpr int kON = D / 8;    // n8 tiles of the O strip (16, D)

  static constexpr std::size_t kQBytes = std::size_t{Br} * kLd * kElem;
  static constexpr std::size_t kKVBytes = std::size_t{Bc} * kLd * kElem;  // K_j or V_j
  static constexpr std::size_t kStageBytes = 2 * kKVBytes;                // one stage: K_j then V_j
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffRing = kOffQ + kQBytes;  // stage s at kOffRing + s*kStageBytes
  /// Dynamic shared memory per block (the table above).
  static constexpr std::size_t kSmemBytes = kOffRing + Stages * kStageBytes;
  /// Blocks per SM __launch_bounds__ asks for: 2, i.e. at most 255 registers with 128 threads, no
  /// cap in practice. ptxas 13.0 uses 204-252 of them (it keeps several ldmatrix
  /// results in flight ahead of their mma); forcing 3 blocks (168 registers) spills, so both head
  /// dims run 2 blocks (8 warps) per SM where shared memory holds them (the table above).
  static constexpr int kMinBlocksPerSm = 2;

  static_assert(D == 64 || D == 128, "stage 06b instantiates D = 64 and D = 128 only");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(kWarpRows == 16, "each warp owns one m16 row strip of Q_i, S, P and O");
  static_assert(Bc % 16 == 0 && D % 16 == 0,
                "S and O strips are whole n8 tile pairs and whole k16 steps (ldmatrix.x4 loads "
                "two n8 tiles of K or V at a time)");
  static_assert((kLd * kElem / 16) % 2 == 1,
                "the padding makes the row stride an odd multiple of 16 bytes, which puts 8 "
                "consecutive rows in 8 different 4-bank groups");
  static_assert((Bc * kChunks) % kThreads == 0,
                "every thread copies the same number of 16-byte chunks of K_j and V_j");
  static_assert((kWarpRows * kChunks) % 32 == 0,
                "every lane copies (and later stores) the same number of chunks of its warp's "
                "Q / O strip");
  static_assert(Stages >= 2,
                "with one stage the copy of tile j+1 could only start after tile j's math");
  static_assert(Stages - 1 <= 8,
                "cuda::pipeline_consumer_wait_prior clamps its count at 8 (the Q wait uses "
                "Stages - 1)");
  static_assert(kQBytes % 128 == 0 && kKVBytes % 128 == 0,
                "regions are whole 128-byte lines, so every region starts at bank 0 and the "
                "conflict analysis of one tile holds for all");
  static_assert(kSmemBytes <= 99 * 1024,
                "fits the 99 KiB opt-in limit of sm_86/sm_89, so every sm_80+ device runs both "
                "head dims with the same tile");
};
//! [traits]

//! [configs]
using TileD64 = RegistersTraits<64, 128, 2>;   // 81 KiB
using TileD128 = RegistersTraits<128, 64, 2>;  // 85 KiB
/// The tile head dim kD runs.
template <int kD>
using TileFor = std::conditional_t<kD == 64, TileD64, TileD128>;
//! [configs]
static_assert(TileD64::Br == TileD128::Br, "Tr is computed once for every head dim");

/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
FS_FUSED_KERNEL_EXPORTS(FusedKernel)

}  // namespace flashsteps::registers_padded
