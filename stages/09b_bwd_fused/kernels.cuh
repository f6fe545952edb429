// stages/09b_bwd_fused/kernels.cuh — what the fused backward's kernels file exports to its
// launcher: the tile traits and the enqueue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/stage.hpp"

namespace flashsteps::bwd_fused {

using SupportedHeadDims = HeadDims<64, 128>;

/// The tile of the fused kernel for dtype T at head dimension kD: one block per (head, K/V tile j)
/// of Bc keys, walking the query tiles i of Br rows. Scalar fp32 arithmetic from shared memory (the
/// tensor cores are the next step's).
template <class T, int kD>
struct BwdFusedTraits {
  static constexpr int D = kD;
  static constexpr int Br = 32;  // query rows per tile of the walk: Q_i, dO_i, LSE_i, D_i
  static constexpr int Bc = 32;  // keys per block: K_j, V_j, dK_j, dV_j
  static constexpr int kThreads = 128;
  static constexpr int kLdKV = D + 2;  // K_j, V_j rows padded: lanes reading rows c, c+1 are 33
                                       // words apart, in different banks
  static constexpr int kPerThreadKV = Bc * D / kThreads;  // dK_j (and dV_j) elements a thread owns
  static constexpr int kPerThreadS = Br * Bc / kThreads;  // S, P, dP, dS elements per thread
  static constexpr int kPerThreadQ = Br * D / kThreads;   // dQ_i elements per thread
  // Shared memory, in bytes (every offset a multiple of 16).
  static constexpr std::size_t kOffK = 0;                                   // (Bc, kLdKV) T
  static constexpr std::size_t kOffV = kOffK + Bc * kLdKV * sizeof(T);      // (Bc, kLdKV) T
  static constexpr std::size_t kOffQ = kOffV + Bc * kLdKV * sizeof(T);      // (Br, D) T
  static constexpr std::size_t kOffDO = kOffQ + Br * D * sizeof(T);         // (Br, D) T
  static constexpr std::size_t kOffP = kOffDO + Br * D * sizeof(T);         // (Br, Bc) fp32
  static constexpr std::size_t kOffDS = kOffP + Br * Bc * sizeof(float);    // (Br, Bc) fp32
  static constexpr std::size_t kOffLse = kOffDS + Br * Bc * sizeof(float);  // (Br) fp32
  static constexpr std::size_t kOffDelta = kOffLse + Br * sizeof(float);    // (Br) fp32
  static constexpr std::size_t kSmemBytes = kOffDelta + Br * sizeof(float);

  static_assert(kThreads % 32 == 0, "blocks of whole warps");
  static_assert((Bc * D) % kThreads == 0 && (Br * Bc) % kThreads == 0 && (Br * D) % kThreads == 0,
                "every thread owns the same number of elements of each tile");
  static_assert(Bc == 32 && D % 32 == 0,
                "a warp covers one row of S (32 keys) and 32 consecutive columns of dK, dV, dQ");
  static_assert(kOffV % 16 == 0 && kOffQ % 16 == 0 && kOffDO % 16 == 0 && kOffP % 16 == 0,
                "16-byte aligned tiles");
  static_assert(kSmemBytes <= 48 * 1024, "no shared-memory opt-in needed");
};

/// Launch parameters shared by the kernels (64-bit: B*H*Sq*D overflows 32 bits at large shapes).
struct Shape {
  std::int64_t bh, sq, skv;
  float scale;
};

/// The workspace: dQ's fp32 accumulator [B*H, Sq, D], then D = rowsum(dO ∘ O), fp32 [B*H, Sq].
std::int64_t workspace_bytes(const Shape& shape, std::int64_t head_dim);

/// Enqueues D (and the zeroed accumulator), the fused kernel and dQ's conversion on `stream`.
template <class T, int kD, bool kCausal>
void enqueue(const Shape& shape, const AttentionArgs& args, cudaStream_t stream);

/// The kernels as launched for `shape`.
template <class T, int kD, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape& shape);

}  // namespace flashsteps::bwd_fused
