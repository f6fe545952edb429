// bench/baselines/cublas/kernels.cuh — what the baseline's kernels file exports to its launcher.
#pragma once

#include <cublas_v2.h>

#include <vector>

#include "flashsteps/stage.hpp"

namespace flashsteps::cublas_baseline {

/// Row pitch of S and P in elements: Skv rounded up to a multiple of 8, so that every row of S
/// (fp32) and of P (16-bit) starts on a 16-byte boundary whatever Skv is. cuBLAS's fastest
/// tensor-core kernels want 16-byte-aligned leading dimensions; an unpadded ragged Skv
/// (say 1001) would push both GEMMs off them, which no practitioner would accept.
inline std::int64_t score_pitch(const Problem& p) {
  return (p.seq_kv + 7) / 8 * 8;
}

/// GEMM → softmax → GEMM on `stream`. Workspace: fp32 S then dtype P, [B·H, Sq, score_pitch]
/// each. Where P starts in the workspace: after S, rounded up to 256 bytes.
inline std::int64_t p_offset_bytes(const Problem& p) {
  return (4 * p.batch_heads() * p.seq_q * score_pitch(p) + 255) / 256 * 256;
}

template <class T, bool kCausal>
void enqueue(cublasHandle_t handle, const Problem& p, const AttentionArgs& args,
             cudaStream_t stream);

template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list();

}  // namespace flashsteps::cublas_baseline
