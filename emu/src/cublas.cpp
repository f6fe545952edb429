// emu/src/cublas.cpp — the cuBLAS calls of the unfused baseline (bench/baselines/cublas), for the
// emulation build. cuBLAS's own kernels are not the project's and are not emulated: this computes
// what the API defines ("cublasGemmStridedBatchedEx" in the cuBLAS documentation: column-major
// C_i = alpha op(A_i) op(B_i) + beta C_i for each batch i), in fp32 with products summed in k
// order, so that the baseline's own kernel — the row softmax between the two products — runs on
// the emulator inside a complete, checkable attention.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

struct Handle {
  cudaStream_t stream = nullptr;
};

float load(cudaDataType_t t, const void* base, std::int64_t i) {
  switch (t) {
    case CUDA_R_32F:
      return static_cast<const float*>(base)[i];
    case CUDA_R_16F:
      return __half2float(static_cast<const __half*>(base)[i]);
    default:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  }
}

void store(cudaDataType_t t, void* base, std::int64_t i, float v) {
  switch (t) {
    case CUDA_R_32F:
      static_cast<float*>(base)[i] = v;
      break;
    case CUDA_R_16F:
      static_cast<__half*>(base)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
      break;
  }
}

bool supported(cudaDataType_t t) {
  return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new Handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete reinterpret_cast<Handle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType_t a_type,
                                          int lda, long long stride_a, const void* B,
                                          cudaDataType_t b_type, int ldb, long long stride_b,
                                          const void* beta, void* C, cudaDataType_t c_type, int ldc,
                                          long long stride_c, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (compute != CUBLAS_COMPUTE_32F || !supported(a_type) || !supported(b_type) ||
      !supported(c_type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // The documented argument rules (leading dimensions at least the stored rows).
  const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
      ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  // With CUBLAS_COMPUTE_32F, alpha and beta are floats.
  float al, be;
  std::memcpy(&al, alpha, sizeof al);
  std::memcpy(&be, beta, sizeof be);
  std::vector<float> opa(std::size_t(m) * k), opb(std::size_t(n) * k);  // op(A) rows, op(B) columns
  for (int b = 0; b < batch; ++b) {
    const std::int64_t oa = b * stride_a, ob = b * stride_b, oc = b * stride_c;
    // op(A)(i, p) and op(B)(p, j) of the column-major operands, each row / column contiguous.
    for (int i = 0; i < m; ++i)
      for (int p = 0; p < k; ++p)
        opa[std::size_t(i) * k + p] = load(
            a_type, A,
            oa + (transa == CUBLAS_OP_N ? i + std::int64_t{p} * lda : p + std::int64_t{i} * lda));
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        opb[std::size_t(j) * k + p] = load(
            b_type, B,
            ob + (transb == CUBLAS_OP_N ? p + std::int64_t{j} * ldb : j + std::int64_t{p} * ldb));
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (int p = 0; p < k; ++p)
          acc += opa[std::size_t(i) * k + p] * opb[std::size_t(j) * k + p];
        const std::int64_t ic = oc + i + std::int64_t{j} * ldc;
        // beta = 0: C is not read (it may hold anything, NaN included), as cuBLAS documents.
        const float c = be == 0.0f ? 0.0f : be * load(c_type, C, ic);
        store(c_type, C, ic, al * acc + c);
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}

// flashsteps/cuda_check.hpp names a failing call's status.
const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    default:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
}
const char* cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "success" : "not supported by the emulator's model of cuBLAS";
}

}  // extern "C"
