// stages/00_scalar/kernels.cuh — what the scalar stage's kernels file exports to its launcher.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "flashsteps/stage.hpp"

namespace flashsteps::scalar {

/// Launch shapes of the scalar stage. Each kernel is a flat grid-stride loop, so the only
/// parameters are block sizes (the row softmax has its own: RowSoftmaxTraits).
struct ScalarTraits {
  static constexpr int kScoreThreads = 256;  // threads per block, scores kernel
  static constexpr int kPvThreads = 256;     // threads per block, P·V kernel
  static constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;  // grid-stride beyond this
  static_assert(kScoreThreads % 32 == 0 && kPvThreads % 32 == 0, "blocks of whole warps");
};

/// Shape parameters shared by the kernels (64-bit: B*H*Sq*Skv overflows 32 bits at S = 16k).
struct Shape {
  std::int64_t bh, sq, skv, d;
  float scale;
};

/// Enqueues scores → softmax → P·V on `stream`; `s` is the fp32 [B*H, Sq, Skv] workspace.
template <class T, bool kCausal>
void enqueue(const Shape& shape, const AttentionArgs& args, cudaStream_t stream);

/// The three kernels as launched for `shape`.
template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape& shape);

}  // namespace flashsteps::scalar
