// =================================================================================================
// baseline_cublas — what a practitioner writes without fusion: two cuBLAS batched GEMMs on tensor
// cores with a softmax kernel between them. It is a row of every table: the unfused stages
// (00–02) should approach it, the fused ones (03+) should beat it.
//
//     S = scale · Q Kᵀ   cublasGemmStridedBatchedEx, fp16/bf16 in, fp32 S out     [B·H, Sq, Skv]
//     P = softmax(S)     one block per row, causal mask applied here, P in the dtype, LSE fp32
//     O = P V            cublasGemmStridedBatchedEx, fp16/bf16 in and out, fp32 accumulation
//
// cuBLAS is column-major, our tensors row-major: a row-major [R, C] matrix is a column-major
// [C, R] one, so S (row-major Sq×Skv) is computed as Sᵀ = K·Qᵀ in cuBLAS's terms, and O as
// Oᵀ = Vᵀ·Pᵀ. With causal masking the GEMMs still compute every score: cuBLAS cannot skip the
// masked half, which is part of the lesson.
//
// Limits: D <= 256, any Sq/Skv >= 1 as long as S (4 bytes) and P (2 bytes) per score fit in
// device memory.
// =================================================================================================
#include <cublas_v2.h>

#include <algorithm>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/reduce.cuh"
#include "flashsteps/cuda_check.hpp"
#include "kernels.cuh"

namespace flashsteps::cublas_baseline {
namespace {

// One block per row of S: max, sum, then P = exp(S - m) / l written in the dtype.
template <class T, bool kCausal>
__global__ void softmax_kernel(const float* __restrict__ s, T* __restrict__ p,
                               float* __restrict__ lse, long long rows, long long sq,
                               long long skv) {
  __shared__ float scratch[32];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* sr = s + row * skv;  // (Skv) row of S
    T* pr = p + row * skv;            // (Skv) row of P
    const long long end = causal_kv_end(row % sq, sq, skv, kCausal);
    float m = -INFINITY;
    for (long long j = threadIdx.x; j < end; j += blockDim.x)
      m = fmaxf(m, sr[j]);
    m = block_reduce(
        m, [](float a, float b) { return fmaxf(a, b); }, -INFINITY, scratch);
    float l = 0.0f;
    if (m != -INFINITY) {
      for (long long j = threadIdx.x; j < end; j += blockDim.x)
        l += expf(sr[j] - m);
    }
    l = block_reduce(
        l, [](float a, float b) { return a + b; }, 0.0f, scratch);
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
    for (long long j = threadIdx.x; j < skv; j += blockDim.x) {
      pr[j] = from_f32<T>(j < end ? expf(sr[j] - m) * inv_l : 0.0f);
    }
    if (threadIdx.x == 0) lse[row] = l > 0.0f ? m + logf(l) : -INFINITY;
  }
}

constexpr int kSoftmaxThreads = 256;
constexpr long long kMaxBlocks = 1 << 20;

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
  float* s = static_cast<float*>(a.workspace);  // [BH, Sq, Skv] fp32
  T* p = reinterpret_cast<T*>(static_cast<char*>(a.workspace) + p_offset_bytes(pr));  // [BH,Sq,Skv]
  const float scale = pr.softmax_scale(), one = 1.0f, zero = 0.0f;
  FS_CUBLAS_CHECK(cublasSetStream(handle, stream));
  // Sᵀ (Skv×Sq, col-major) = K (stored D×Skv, transposed) · Qᵀ (stored D×Sq)
  FS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, skv, sq, d, &scale, a.k, cuda_type<T>(), d,
      static_cast<long long>(skv) * d, a.q, cuda_type<T>(), d, static_cast<long long>(sq) * d,
      &zero, s, CUDA_R_32F, skv, static_cast<long long>(sq) * skv, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  const long long rows = pr.batch_heads() * pr.seq_q;
  const long long blocks = std::min(rows, kMaxBlocks);
  softmax_kernel<T, kCausal><<<blocks, kSoftmaxThreads, 0, stream>>>(s, p, a.lse, rows, sq, skv);
  FS_CHECK_LAUNCH();
  // Oᵀ (D×Sq, col-major) = Vᵀ (stored D×Skv) · Pᵀ (stored Skv×Sq)
  FS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, d, sq, skv, &one, a.v, cuda_type<T>(), d,
      static_cast<long long>(skv) * d, p, cuda_type<T>(), skv, static_cast<long long>(sq) * skv,
      &zero, a.o, cuda_type<T>(), d, static_cast<long long>(sq) * d, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list() {
  const std::string tag = std::string("<") + dtype_name<T>() + (kCausal ? ",causal>" : ">");
  // The GEMM kernels are cuBLAS's own (pick them up in Nsight Compute); ours is the softmax.
  return {{"softmax" + tag, reinterpret_cast<const void*>(&softmax_kernel<T, kCausal>),
           kSoftmaxThreads, 0}};
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
