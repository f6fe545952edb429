// stages/09a_bwd_scalar/kernels.cuh — what the scalar backward's kernels file exports to its
// launcher.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "flashsteps/stage.hpp"

namespace flashsteps::bwd_scalar {

/// Launch shapes of the scalar backward. Each kernel is a flat grid-stride loop over the elements
/// it writes, so the only parameters are block sizes.
struct BwdScalarTraits {
  static constexpr int kThreads = 256;                               // threads per block, all
  static constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;  // grid-stride beyond this
  static_assert(kThreads % 32 == 0, "blocks of whole warps");
};

/// Shape parameters shared by the kernels (64-bit: B*H*Sq*Skv overflows 32 bits at S = 16k).
struct Shape {
  std::int64_t bh, sq, skv, d;
  float scale;
};

/// The workspace: S then P (fp32 [B*H, Sq, Skv]), dP then dS (the same), and D (fp32 [B*H, Sq]).
std::int64_t workspace_bytes(const Shape& shape);

/// Enqueues D, S, P, dP, dS, dV, dK, dQ on `stream`.
template <class T, bool kCausal>
void enqueue(const Shape& shape, const AttentionArgs& args, cudaStream_t stream);

/// The kernels as launched for `shape`.
template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape& shape);

}  // namespace flashsteps::bwd_scalar
