// stages/02_wmma/kernels.cuh — what the WMMA stage's kernels file exports to its launcher.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/device_info.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps::wmma_stage {

/// Head dimensions this stage is compiled for (kernels are templates on D).
using SupportedHeadDims = HeadDims<64, 128>;

//! [traits]
/// Tile sizes of the WMMA stage, paper notation: Br query rows, Bc keys per block.
///
/// Eight warps in a 2 × 4 grid split a block tile (wm = warp / 4, wn = warp % 4); each warp
/// holds its part as 16 × 16 fp32 accumulator fragments, rows × columns of fragments drawn:
///
///     scores tile (Br, Bc) = (64, 64)            P·V tile (Br, D)
///     ┌─────┬─────┬─────┬─────┐                  ┌───────┬───────┬───────┬───────┐
///     │ w0  │ w1  │ w2  │ w3  │  32 rows         │ w0    │ w1    │ w2    │ w3    │  32 rows
///     │ 2×1 │ 2×1 │ 2×1 │ 2×1 │                  │ 2×D/64│ 2×D/64│ 2×D/64│ 2×D/64│
///     ├─────┼─────┼─────┼─────┤                  ├───────┼───────┼───────┼───────┤
///     │ w4  │ w5  │ w6  │ w7  │  32 rows         │ w4    │ w5    │ w6    │ w7    │  32 rows
///     └─────┴─────┴─────┴─────┘                  └───────┴───────┴───────┴───────┘
///      16 keys each                                D/4 columns each
///
/// Operands are staged in shared memory in the input dtype with 8 elements (16 bytes) of padding
/// per row, so the 8 rows a fragment load touches at once start in different banks. The
/// accumulators come back through an fp32 staging tile that reuses the operands' memory.
template <int D>
struct WmmaTraits {
  static constexpr int kHeadDim = D;
  static constexpr int kFrag = 16;                  // WMMA shape m = n = k = 16
  static constexpr int kWarpsM = 2, kWarpsN = 4;    // warps along rows, along columns
  static constexpr int kWarps = kWarpsM * kWarpsN;  // 8
  static constexpr int kThreads = 32 * kWarps;      // 256 per block
  static constexpr int kBr = 64;                    // query rows per block (S, P, O)
  static constexpr int kBc = 64;                    // keys per block (scores kernel)
  static constexpr int kBk = 64;                    // keys per chunk (P·V kernel)
  static constexpr int kVec = 8;                    // 16-bit elements per 16-byte access
  static constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;  // grid-stride beyond this

  // Each warp's part of a tile, in fragments.
  static constexpr int kWarpRows = kBr / kWarpsM;      // 32 rows
  static constexpr int kWarpColsS = kBc / kWarpsN;     // 16 keys (scores)
  static constexpr int kWarpColsO = D / kWarpsN;       // D/4 columns (P·V)
  static constexpr int kFragsM = kWarpRows / kFrag;    // 2
  static constexpr int kFragsNS = kWarpColsS / kFrag;  // 1
  static constexpr int kFragsNO = kWarpColsO / kFrag;  // D/64

  // Shared-memory row pitches in elements: +8 for 16-bit rows, +4 for fp32 rows (16 bytes).
  static constexpr int kLdQK = D + 8;   // Q and K tiles, (rows, D)
  static constexpr int kLdP = kBk + 8;  // P chunk, (Br, Bk)
  static constexpr int kLdV = D + 8;    // V chunk, (Bk, D)
  static constexpr int kLdS = kBc + 4;  // fp32 staging of the S tile, (Br, Bc)
  static constexpr int kLdO = D + 4;    // fp32 staging of the O tile, (Br, D)

  // Shared-memory bytes (dynamic); the fp32 staging tile aliases the operand tiles.
  static constexpr int kQBytes = kBr * kLdQK * 2;
  static constexpr int kScoresOperandBytes = kQBytes + kBc * kLdQK * 2;
  static constexpr int kScoresStageBytes = kBr * kLdS * 4;
  static constexpr int kScoresSmemBytes =
      kScoresOperandBytes > kScoresStageBytes ? kScoresOperandBytes : kScoresStageBytes;
  static constexpr int kPBytes = kBr * kLdP * 2;
  static constexpr int kPvOperandBytes = kPBytes + kBk * kLdV * 2;
  static constexpr int kPvStageBytes = kBr * kLdO * 4;
  static constexpr int kPvSmemBytes =
      kPvOperandBytes > kPvStageBytes ? kPvOperandBytes : kPvStageBytes;

  static_assert(kThreads <= 1024 && kThreads % 32 == 0, "a block of whole warps");
  static_assert(kBr % (kWarpsM * kFrag) == 0 && kBc % (kWarpsN * kFrag) == 0,
                "the scores tile must split into whole fragments per warp");
  static_assert(D % (kWarpsN * kFrag) == 0 && kBk % kFrag == 0,
                "the P·V tile must split into whole fragments per warp: D a multiple of 64");
  static_assert(D % kVec == 0 && kBk % kVec == 0, "rows are copied as whole 16-byte vectors");
  // WMMA's rule as the CUDA C++ Programming Guide states it for load_matrix_sync and
  // store_matrix_sync ("Warp Matrix Functions"): ldm a multiple of 16 bytes, the fragment pointer
  // 32-byte aligned. The PTX ISA's wmma.load / wmma.store text asks more of fp16 operands and
  // fp32 accumulators (every row 32-byte aligned); kernels.cu says why this stage relies on the
  // guide's rule and not on that one.
  static_assert((kLdQK * 2) % 16 == 0 && (kLdP * 2) % 16 == 0 && (kLdV * 2) % 16 == 0 &&
                    (kLdS * 4) % 16 == 0 && (kLdO * 4) % 16 == 0,
                "ldm must be a multiple of 16 bytes (CUDA C++ Programming Guide, "
                "load_matrix_sync and store_matrix_sync)");
  static_assert((kFrag * kLdQK * 2) % 32 == 0 && (kFrag * kLdP * 2) % 32 == 0 &&
                    (kFrag * kLdV * 2) % 32 == 0 && (kFrag * kLdS * 4) % 32 == 0 &&
                    (kFrag * kLdO * 4) % 32 == 0,
                "every fragment's first element must be 32-byte aligned (CUDA C++ Programming "
                "Guide: mptr 256-bit aligned); fragments start every 16th row and column");
  static_assert((kLdQK * 2) % 128 == 16 && (kLdP * 2) % 128 == 16 && (kLdV * 2) % 128 == 16 &&
                    (kLdS * 4) % 128 == 16 && (kLdO * 4) % 128 == 16,
                "the padding puts 8 consecutive rows' 16-byte pieces in 8 different bank groups");
  static_assert(kQBytes % 128 == 0 && kPBytes % 128 == 0,
                "the second operand tile must start 128-byte aligned");
  static_assert((kBr * D / kVec) % kThreads == 0 && (kBc * D / kVec) % kThreads == 0 &&
                    (kBr * kBk / kVec) % kThreads == 0 && (kBk * D / kVec) % kThreads == 0 &&
                    (kBr * kBc) % kThreads == 0,
                "every thread copies the same number of vectors of each tile");
};
//! [traits]

/// Shape parameters shared by the kernels (64-bit: B·H·Sq·Skv overflows 32 bits at S = 16k).
struct Shape {
  std::int64_t bh, sq, skv;
  std::int64_t ldp;  ///< P's row pitch in elements: Skv rounded up to 8 (16-byte aligned rows)
  float scale;
};

/// P's row pitch for `skv` keys: rows of P start 16-byte aligned for vector loads.
constexpr std::int64_t p_row_pitch(std::int64_t skv) {
  return (skv + 7) / 8 * 8;
}
/// Where P starts in the workspace: after fp32 S, rounded up to 256 bytes.
constexpr std::int64_t p_offset_bytes(std::int64_t bh, std::int64_t sq, std::int64_t skv) {
  return (4 * bh * sq * skv + 255) / 256 * 256;
}

/// Largest dynamic shared memory per block of this stage's kernels at head dim `d`.
int smem_bytes(int d);

/// Raises each kernel's dynamic shared-memory limit to what it uses (cudaFuncSetAttribute),
/// for every head dim whose kernels fit `dev`'s opt-in limit. Outside any timed region.
void configure_kernels(const DeviceInfo& dev);

/// Enqueues scores → row softmax (P in the dtype) → P·V on `stream`. Workspace: fp32 S
/// [B·H, Sq, Skv], then P [B·H, Sq, ldp] in the dtype from p_offset_bytes().
template <class T, int D, bool kCausal>
void enqueue(const Shape& shape, const AttentionArgs& args, cudaStream_t stream);

/// The three kernels as launched for `shape`.
template <class T, int D, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape& shape);

}  // namespace flashsteps::wmma_stage
