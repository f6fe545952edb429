// stages/03_online_softmax/kernels.cuh — what the fused stage's kernel file exports to its
// launcher: the tile traits (sizes, shared-memory layout, the assumptions behind them) and the
// kernel itself (struct Kernel: one variant per dtype, head dim and causal flag).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps::online_softmax {

/// Head dimensions the fused kernel is instantiated for.
using SupportedHeadDims = HeadDims<64, 128>;

/// Tiles of the fused kernel for head dimension kD. One thread block owns one query block Q_i
/// (Br rows) of one head; each of its 4 warps owns 16 of those rows for the whole kernel, so S,
/// P, O and the running m, l of a row are touched by one warp only (see the picture in
/// kernels.cu). Only K_j / V_j are shared between warps.
///
/// Shared memory, in this order (each region starts on a 128-byte boundary):
///   Q   (Br, D)  fp16/bf16, row stride D + 8     — loaded once
///   KV  (Bc, D)  fp16/bf16, row stride D + 8     — K_j, then V_j in the same buffer
///   S   (Br, Bc) fp32,      row stride Bc + 4    — raw scores Q_i K_j^T
///   P   (Br, Bc) fp16/bf16, row stride Bc + 8    — exp2(...) rounded to the dtype
///   O   (Br, D)  fp32,      row stride D + 4     — the unnormalised output accumulator
/// Why the padding: a WMMA fragment load or store touches the same columns of 16 consecutive
/// rows. With an unpadded stride (128, 256 or 512 bytes, a multiple of the 128 bytes that the 32
/// banks span) every row starts in bank 0, so those accesses pile onto the same few banks and
/// serialize. +8 halves / +4 floats make the stride 16 bytes past a multiple of 128: each row
/// starts 4 banks after the previous one, and 8 consecutive rows' 16-byte pieces cover all 32
/// banks once. (WMMA needs strides that are multiples of 16 bytes, so the pad cannot be smaller.)
/// That makes the WMMA accesses conflict-free, not the element-wise ones: in the softmax and the
/// O rescale, lane pair (2r, 2r+1) walks row r, and rows r and r + 8 start in the same bank, so
/// each of those reads and writes is a 2-way conflict (as are the epilogue's float4 reads).
/// Stage 06b removes the round trips altogether; rotating rows 8..15's column order would only
/// halve the cost of a step that should go.
///
/// WMMA's alignment rule, as the asserts below check it, is the CUDA C++ Programming Guide's ("Warp
/// Matrix Functions": load_matrix_sync, store_matrix_sync): strides that are multiples of 16 bytes,
/// fragment pointers 32-byte aligned. The PTX ISA ("Matrix Storage for WMMA") asks more, every row
/// of an fp16 operand or fp32 accumulator 32-byte aligned, which these strides do not give; stage
/// 02's kernels.cu says why the stages rely on the guide (here the O fragment loads add 8-byte
/// LDS.64 to the instructions it lists).
//! [traits]
template <int kD>
struct OnlineSoftmaxTraits {
  static constexpr int D = kD;
  static constexpr int Br = 64;  // query rows per thread block
  static constexpr int Bc = 64;  // key/value rows per tile
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = Br / kWarps;  // rows of Q_i one warp owns: 16
  static constexpr int kFrag = 16;               // WMMA tile: m = n = k = 16
  static constexpr int kElem = 2;                // bytes of fp16 and bf16
  static constexpr int kVec = 16 / kElem;        // elements per 16-byte global access

  // Row strides in elements (padded, see above).
  static constexpr int kLdQ = D + 8;   // Q tile, dtype
  static constexpr int kLdKV = D + 8;  // K / V tile, dtype
  static constexpr int kLdS = Bc + 4;  // S tile, fp32
  static constexpr int kLdP = Bc + 8;  // P tile, dtype
  static constexpr int kLdO = D + 4;   // O accumulator, fp32

  static constexpr std::size_t align128(std::size_t b) { return (b + 127) / 128 * 128; }
  static constexpr std::size_t kQBytes = align128(std::size_t{Br} * kLdQ * kElem);
  static constexpr std::size_t kKVBytes = align128(std::size_t{Bc} * kLdKV * kElem);
  static constexpr std::size_t kSBytes = align128(std::size_t{Br} * kLdS * 4);
  static constexpr std::size_t kPBytes = align128(std::size_t{Br} * kLdP * kElem);
  static constexpr std::size_t kOBytes = align128(std::size_t{Br} * kLdO * 4);
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffKV = kOffQ + kQBytes;
  static constexpr std::size_t kOffS = kOffKV + kKVBytes;
  static constexpr std::size_t kOffP = kOffS + kSBytes;
  static constexpr std::size_t kOffO = kOffP + kPBytes;
  /// Dynamic shared memory per block: 61 KiB for D = 64, 93 KiB for D = 128.
  static constexpr std::size_t kSmemBytes = kOffO + kOBytes;

  static_assert(D == 64 || D == 128, "stage 03 instantiates D = 64 and D = 128 only");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(Br % (kWarps * kFrag) == 0 && kWarpRows == kFrag,
                "each warp owns exactly one 16-row WMMA strip of Q_i, S, P and O");
  static_assert(kWarpRows * 2 == 32,
                "the softmax gives each row of a warp's strip to a pair of lanes");
  static_assert(Bc % kFrag == 0 && D % kFrag == 0, "S and O tiles are whole 16x16 fragments");
  static_assert(Bc % 2 == 0 && D % 2 == 0, "the two lanes of a row split its columns evenly");
  static_assert(D % kVec == 0, "rows are copied in 16-byte pieces");
  static_assert((Br * D / kVec) % kThreads == 0 && (Bc * D / kVec) % kThreads == 0,
                "every thread copies the same number of 16-byte pieces of a tile");
  static_assert((kWarpRows * D / kVec) % 32 == 0,
                "every lane stores the same number of 16-byte pieces of O (shuffles inside)");
  static_assert((kLdQ * kElem) % 16 == 0 && (kLdKV * kElem) % 16 == 0 && (kLdP * kElem) % 16 == 0 &&
                    (kLdS * 4) % 16 == 0 && (kLdO * 4) % 16 == 0,
                "WMMA (CUDA C++ Programming Guide: ldm a multiple of 16 bytes) and 16-byte copies "
                "need row strides that are multiples of 16 bytes");
  static_assert(
      (kFrag * kLdQ * kElem) % 32 == 0 && (kFrag * kLdKV * kElem) % 32 == 0 &&
          (kFrag * kLdP * kElem) % 32 == 0 && (kFrag * kLdS * 4) % 32 == 0 &&
          (kFrag * kLdO * 4) % 32 == 0,
      "WMMA fragment pointers (every 16th row, every 16th column) must be 32-byte aligned (CUDA "
      "C++ Programming Guide: mptr 256-bit aligned)");
  static_assert((kLdQ * kElem) % 128 == 16 && (kLdKV * kElem) % 128 == 16 &&
                    (kLdP * kElem) % 128 == 16 && (kLdS * 4) % 128 == 16 && (kLdO * 4) % 128 == 16,
                "the padding puts 8 consecutive rows in 8 different 4-bank groups");
  static_assert(kSmemBytes <= 99 * 1024,
                "fits the 99 KiB opt-in limit of sm_86/sm_89 (L4, RTX 30/40), not only A100's");
};
//! [traits]

/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
FS_FUSED_KERNEL_EXPORTS(FusedKernel)

}  // namespace flashsteps::online_softmax
