// bench/baselines/cublas/kernels.cuh — what the baseline's kernels file exports to its launcher.
#pragma once

#include <cublas_v2.h>

#include <vector>

#include "flashsteps/stage.hpp"

namespace flashsteps::cublas_baseline {

/// GEMM → softmax → GEMM on `stream`. Workspace: fp32 S then dtype P, [B·H, Sq, Skv] each.
/// Where P starts in the workspace: after S, rounded up to 256 bytes.
inline std::int64_t p_offset_bytes(const Problem& p) {
  return (4 * p.batch_heads() * p.seq_q * p.seq_kv + 255) / 256 * 256;
}

template <class T, bool kCausal>
void enqueue(cublasHandle_t handle, const Problem& p, const AttentionArgs& args,
             cudaStream_t stream);

template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list();

}  // namespace flashsteps::cublas_baseline
