// stages/10d_paged_kv/kernels.cuh — what the paged-KV stage's kernel file exports to its launcher:
// 10b's tile traits (sizes, the swizzled shared-memory ring, the assumptions behind them) and
// tiles, unchanged, and the two kernels: the attention kernel (struct Kernel: one variant per
// dtype, tile and causal flag), whose Shape and signature are 10b's with what a paged cache adds
// (the page size, the block table), and 10b's combine kernel (struct Combine), at the end.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps::paged_kv {

/// Head dimensions the kernel is instantiated for.
using SupportedHeadDims = HeadDims<64, 128>;

/// Tiles of the register-resident kernel for head dimension kD, kBc keys per tile and a ring of
/// kStages shared-memory stages. As in stages 03 and 04, one thread block owns one query block Q_i
/// (Br = 64 rows) of one head and each of its 4 warps owns 16 of those rows for the whole kernel.
/// New: S_ij, P_ij and O_i never touch shared memory — they live in the warp's registers, in the
/// mma.m16n8k16 fragment layouts (kernels.cu has the pictures) — and so does the warp's Q strip,
/// loaded once. Shared memory holds only what several warps read: the K_j / V_j ring.
///
/// Shared memory, in this order (each region a whole number of 1 KiB swizzle blocks):
///   Q      (Br, D) fp16/bf16, swizzled, no padding — copied once, read once into registers;
///                                                    reused at the end to stage O for 16-byte
///                                                    stores
///   ring   kStages x { K (Bc, D), V (Bc, D) }      — fp16/bf16, swizzled, no padding
/// Every row is D * 2 = 128 or 256 bytes, split into 16-byte chunks; chunk c of row r is stored
/// at chunk position c ^ (r % 8) of that row (the picture is in kernels.cu, at the swizzle
/// function). Stage 03/04 padded rows by 16 bytes instead; the XOR permutation gets the same
/// conflict freedom for free in bytes, and it is what makes the ldmatrix reads of 8 rows at one
/// column conflict-free while the cp.async writes of 8 chunks of one row stay conflict-free too.
///
///   D    Bc   kStages  bytes           sm_86/89 (99 KiB)  sm_80 (163 KiB)  sm_90 (227 KiB)
///   64   128  2         73728 (72 KiB) yes, 1 block/SM    yes, 2/SM        yes, 2/SM*  <- D = 64
///   128  64   2         81920 (80 KiB) yes, 1 block/SM    yes, 2/SM        yes, 2/SM   <- D = 128
///   (* shared memory would hold 3; registers hold 2, see kMinBlocksPerSm)
///   (stage 04: 88 KiB at D = 64; 144 KiB at D = 128, 98 KiB with Bc = 32 on sm_86/89)
/// Both tiles fit every sm_80+ device, so unlike stage 04 there is no per-device tile choice.
/// Why these: the S strip costs Bc/2 fp32 registers per thread and the O strip D/2, so Bc * D is
/// what the register file can hold next to Q's D/4: Bc = 128 at D = 64 (64 + 32 + 16 registers),
/// Bc = 64 at D = 128 (32 + 64 + 32). Two stages: a tile's copy (~1,000 cycles from L2) is shorter
/// than a tile's math (~1,300 cycles per block with the blocks an SM holds, see kernels.cu), so a
/// third stage would only take shared memory — and at D = 64 on H100, a third resident block.
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
  static constexpr int kSwizzle = 8;        // rows per swizzle period = chunks per 128 bytes

  // mma.m16n8k16 counts per warp (each warp: 16 rows).
  static constexpr int kQK = D / 16;   // k-steps of S = Q K^T = A fragments of the Q strip
  static constexpr int kSN = Bc / 8;   // n8 tiles of the S strip (16, Bc)
  static constexpr int kPK = Bc / 16;  // k-steps of O += P V = A fragments of the P strip
  static constexpr int kON = D / 8;    // n8 tiles of the O strip (16, D)

  static constexpr std::size_t kQBytes = std::size_t{Br} * D * kElem;
  static constexpr std::size_t kKVBytes = std::size_t{Bc} * D * kElem;  // K_j or V_j
  static constexpr std::size_t kStageBytes = 2 * kKVBytes;              // one stage: K_j then V_j
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffRing = kOffQ + kQBytes;  // stage s at kOffRing + s*kStageBytes
  /// Dynamic shared memory per block (the table above).
  static constexpr std::size_t kSmemBytes = kOffRing + Stages * kStageBytes;
  /// Blocks per SM __launch_bounds__ asks for: 2, i.e. at most 255 registers with 128 threads, no
  /// cap in practice. ptxas 13.0 uses 204-252 of them (it keeps several ldmatrix
  /// results in flight ahead of their mma); forcing 3 blocks at D = 64 (168 registers, what H100's
  /// shared memory would allow) spills, so both head dims run 2 blocks (8 warps) per SM.
  static constexpr int kMinBlocksPerSm = 2;

  static_assert(D == 64 || D == 128, "stage 10d instantiates D = 64 and D = 128 only");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(kWarpRows == 16, "each warp owns one m16 row strip of Q_i, S, P and O");
  static_assert(Bc % 16 == 0 && D % 16 == 0,
                "S and O strips are whole n8 tile pairs and whole k16 steps (ldmatrix.x4 loads "
                "two n8 tiles of K or V at a time)");
  static_assert(kChunks % kSwizzle == 0,
                "the XOR swizzle permutes the 8 chunks of each 128-byte piece of a row: rows must "
                "be a multiple of 128 bytes");
  static_assert(Br % kSwizzle == 0 && Bc % kSwizzle == 0 && kWarpRows % kSwizzle == 0,
                "every tile and warp strip starts at a row that is a multiple of the swizzle "
                "period, so row % 8 is the same in tile and strip coordinates");
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
  static_assert(kQBytes % 1024 == 0 && kKVBytes % 1024 == 0,
                "regions are whole swizzle blocks (8 rows x 128 bytes), so every region starts "
                "at bank 0 and the conflict analysis of one block holds for all");
  static_assert(kSmemBytes <= 99 * 1024,
                "fits the 99 KiB opt-in limit of sm_86/sm_89, so every sm_80+ device runs both "
                "head dims with the same tile");
};
//! [traits]

//! [configs]
using TileD64 = RegistersTraits<64, 128, 2>;   // 72 KiB
using TileD128 = RegistersTraits<128, 64, 2>;  // 80 KiB
/// The tile head dim kD runs.
template <int kD>
using TileFor = std::conditional_t<kD == 64, TileD64, TileD128>;
//! [configs]
static_assert(TileD64::Br == TileD128::Br, "Tr is computed once for every head dim");

//! [shape]
/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
/// 10b's Shape and kernel, and what pages add: the page size and the table's row length in the
/// Shape (the launcher's complete_shape() fills them, with 10b's split count), and the block table
/// as one more argument.
struct Shape {
  std::int64_t bh;  // B * H: one block row per (sequence, query head)
  int sq, skv;      // Sq; Skv, the rows each K/V head's cache has room for (its stride)
  int tr;
  float scale_log2;
  int heads = 1;        // H: block row bh is query head bh % H of sequence bh / H
  int group = 1;        // H / H_kv: query heads per K/V head
  int splits = 1;       // gridDim.y: the splits of each block row's keys
  int split_tiles = 0;  // key tiles per split: split s reads tiles [s * split_tiles, + split_tiles)
  int page_size = 0;    // keys per page; Skv for a contiguous cache (one page per sequence)
  int pages_per_seq = 1;  // the block table's row length, ceil(Skv / page_size)
};
/// The page sizes the kernel takes are multiples of this: at least the rows the 128 copiers cover
/// in one step (16 at D = 64, 8 at D = 128), so a thread's next row is at most one page on.
inline constexpr int kPageMultiple = 16;
/// cache_seqlens: [B] keys each sequence holds, or null: every sequence holds Skv.
/// block_table: [B, pages_per_seq] pages of K and V, or null: K and V contiguous.
/// o_part, lse_part: with splits > 1, each split's O / l, fp32 [splits, B*H*Sq, D], and its LSE,
/// [splits, B*H*Sq]; null with one split, which writes O and LSE itself, as 10a.
template <class T, class ShapeT>
using PagedKvKernel = void (*)(const T*, const T*, const T*, T*, float*, const std::int32_t*,
                               const std::int32_t*, float*, float*, ShapeT);
struct Kernel : ::flashsteps::FusedKernelTypes<Shape, PagedKvKernel> {
  template <class T, class Tile, bool kCausal>
  static Fn<T> of();
};
//! [shape]

/// The combine kernel: one warp per row of O, kCombineRows rows per block. It reads the partial
/// outputs of every split of its row and writes the row's O (dtype) and LSE.
inline constexpr int kCombineRows = 4;
template <class T>
using CombineKernel = void (*)(const float*, const float*, T*, float*, std::int64_t, int);
struct Combine {
  template <class T, int kD>
  static CombineKernel<T> of();
};

}  // namespace flashsteps::paged_kv
