// =================================================================================================
// baseline_cublas — what a practitioner writes without fusion: two cuBLAS batched GEMMs on tensor
// cores with a softmax kernel between them. It is a row of every table: the unfused stages
// (00–02) should approach it, the fused ones (03+) should beat it.
//
//     S = scale · Q Kᵀ   cublasGemmStridedBatchedEx, fp16/bf16 in, fp32 S out     [B·H, Sq, Skv]
//     P = softmax(S)     one block per row, causal mask applied here, P in the dtype, LSE fp32
//
// S and P are stored with their rows padded to a multiple of 8 elements (score_pitch), as a
// practitioner would: the GEMMs' leading dimension stays 16-byte aligned at any Skv. The padding
// columns are never read (the first GEMM leaves S's unwritten, the softmax writes P's as 0 and the
// second GEMM's k = Skv stops before them).
//     O = P V            cublasGemmStridedBatchedEx, fp16/bf16 in and out, fp32 accumulation
//
// cuBLAS is column-major, our tensors row-major: a row-major [R, C] matrix is a column-major
// [C, R] one, so S (row-major Sq×Skv) is computed as Sᵀ = K·Qᵀ in cuBLAS's terms, and O as
// Oᵀ = Vᵀ·Pᵀ. With causal masking the GEMMs still compute every score: cuBLAS cannot skip the
// masked half, which is part of the lesson.
//
// Limits: D <= 256, any Sq/Skv >= 1 as long as S (4 bytes) and P (2 bytes) per padded score fit
// in device memory.
// =================================================================================================
#include <cublas_v2.h>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/row_softmax.cuh"
#include "flashsteps/cuda_check.hpp"
#include "kernels.cuh"

namespace flashsteps::cublas_baseline {
namespace {

template <class T>
constexpr cudaDataType_t cuda_type() {
  return std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;
}

}  // namespace

template <class T, bool kCausal>
void enqueue(cublasHandle_t handle, const Problem& pr, const AttentionArgs& a,
             cudaStream_t stream) {
  const int sq = static_cast<int>(pr.seq_q), skv = static_cast<int>(pr.seq_kv);
  const int d = static_cast<int>(pr.head_dim), batch = static_cast<int>(pr.batch_heads());
  const int ld = static_cast<int>(score_pitch(pr));  // row pitch of S and P, >= Skv
  float* s = static_cast<float*>(a.workspace);       // [BH, Sq, ld] fp32
  T* p = reinterpret_cast<T*>(static_cast<char*>(a.workspace) + p_offset_bytes(pr));  // [BH,Sq,ld]
  const float scale = pr.softmax_scale(), one = 1.0f, zero = 0.0f;
  FS_CUBLAS_CHECK(cublasSetStream(handle, stream));
  // Sᵀ (Skv×Sq, col-major) = K (stored D×Skv, transposed) · Qᵀ (stored D×Sq)
  FS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, skv, sq, d, &scale, a.k, cuda_type<T>(), d,
      static_cast<long long>(skv) * d, a.q, cuda_type<T>(), d, static_cast<long long>(sq) * d,
      &zero, s, CUDA_R_32F, ld, static_cast<long long>(sq) * ld, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  // The unfused stages' row softmax (flashsteps/cuda/row_softmax.cuh), P written in the dtype.
  launch_row_softmax<T, kCausal>(s, p, a.lse, {pr.batch_heads() * pr.seq_q, sq, skv, ld, ld},
                                 stream);
  // Oᵀ (D×Sq, col-major) = Vᵀ (stored D×Skv) · Pᵀ (stored Skv×Sq)
  FS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, d, sq, skv, &one, a.v, cuda_type<T>(), d,
      static_cast<long long>(skv) * d, p, cuda_type<T>(), ld, static_cast<long long>(sq) * ld,
      &zero, a.o, cuda_type<T>(), d, static_cast<long long>(sq) * d, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list() {
  // The GEMM kernels are cuBLAS's own (pick them up in Nsight Compute); ours is the softmax.
  return {row_softmax_info<T, kCausal>()};
}

#define FS_INSTANTIATE(T, C)                                                                       \
  template void enqueue<T, C>(cublasHandle_t, const Problem&, const AttentionArgs&, cudaStream_t); \
  template std::vector<KernelLaunchInfo> kernel_list<T, C>();
FS_INSTANTIATE(__half, false)
FS_INSTANTIATE(__half, true)
FS_INSTANTIATE(__nv_bfloat16, false)
FS_INSTANTIATE(__nv_bfloat16, true)
#undef FS_INSTANTIATE

}  // namespace flashsteps::cublas_baseline
