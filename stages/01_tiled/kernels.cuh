// stages/01_tiled/kernels.cuh — what the tiled stage's kernels file exports to its launcher.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/stage.hpp"

namespace flashsteps::tiled {

/// Head dimensions this stage is compiled for (kernels are templates on D).
using SupportedHeadDims = HeadDims<64, 128>;

//! [traits]
/// Tile sizes of the tiled stage, paper notation: Br query rows and Bc keys per block.
///
/// Both kernels run a 16 × 16 grid of threads over a block tile. Thread (ty, tx), with
/// threadIdx.x = 16·ty + tx, owns a strided (not contiguous) micro-tile of it:
///
///                 column  tx     tx+16   tx+32   tx+48        (scores: Tn = 4 columns;
///     row ty              x      x       x       x             P·V: Td = D/16 columns)
///     row ty+16           x      x       x       x
///     row ty+32           x      x       x       x            (Tm = 4 rows)
///     row ty+48           x      x       x       x
///
/// A warp is then two values of ty and all sixteen of tx: its shared-memory reads are two
/// broadcast words (the rows) and sixteen consecutive words (the columns), conflict-free, and its
/// global stores are 16 consecutive elements of two rows.
template <int D>
struct TiledTraits {
  static constexpr int kHeadDim = D;
  static constexpr int kThreadsX = 16;                    // threads along a tile's columns
  static constexpr int kThreadsY = 16;                    // threads along a tile's rows
  static constexpr int kThreads = kThreadsX * kThreadsY;  // 256 per block
  static constexpr int kBr = 64;                          // query rows per block (S, P, O)
  static constexpr int kBc = 64;                          // keys per block (scores kernel)
  static constexpr int kBk = 32;                          // reduction chunk: of D, then of keys
  static constexpr int kLd = kBk + 1;                     // smem row pitch of a chunk (floats)
  static constexpr int kTm = kBr / kThreadsY;             // rows per thread: 4
  static constexpr int kTn = kBc / kThreadsX;             // score columns per thread: 4
  static constexpr int kTd = D / kThreadsX;               // output columns per thread: 4 or 8
  static constexpr int kVec = 4;                          // elements per global load (8 bytes)
  static constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;  // grid-stride beyond this

  // Shared memory, fp32 (the products run on fp32 FMA units; inputs are converted on load).
  static constexpr int kScoresSmemBytes = (kBr + kBc) * kLd * 4;    // Q and K chunks
  static constexpr int kPvSmemBytes = kBr * kLd * 4 + kBk * D * 4;  // P and V chunks

  static_assert(kThreads % 32 == 0 && kThreadsX * 2 == 32,
                "a warp must be two rows of 16 threads for the broadcast/consecutive smem reads");
  static_assert(kBr % kThreadsY == 0 && kBc % kThreadsX == 0 && D % kThreadsX == 0,
                "each tile dimension must split evenly over the 16 × 16 threads");
  static_assert(D % kBk == 0, "D must be a whole number of reduction chunks");
  static_assert(kBk % kVec == 0 && D % kVec == 0, "global loads are whole 4-element vectors");
  static_assert((kBr * kBk / kVec) % kThreads == 0 && (kBc * kBk / kVec) % kThreads == 0 &&
                    (kBk * D / kVec) % kThreads == 0 && (kBr * kBk) % kThreads == 0,
                "every thread loads the same number of elements of each chunk (Q, K, V, P)");
  static_assert(kLd % 2 == 1, "an odd row pitch puts the rows of a chunk in different banks");
  static_assert(kScoresSmemBytes <= 48 * 1024 && kPvSmemBytes <= 48 * 1024,
                "static shared memory is limited to 48 KB per block");
};
//! [traits]

/// Shape parameters shared by the kernels (64-bit: B·H·Sq·Skv overflows 32 bits at S = 16k).
struct Shape {
  std::int64_t bh, sq, skv;
  float scale;
};

/// Enqueues scores → row softmax (in place) → P·V on `stream`; `args.workspace` is the fp32
/// [B·H, Sq, Skv] score matrix.
template <class T, int D, bool kCausal>
void enqueue(const Shape& shape, const AttentionArgs& args, cudaStream_t stream);

/// The three kernels as launched for `shape`.
template <class T, int D, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape& shape);

}  // namespace flashsteps::tiled
