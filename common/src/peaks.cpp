#include "flashsteps/peaks.hpp"

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_fill.hpp"

namespace flashsteps {

GemmPeak::GemmPeak(DType t, int n)
    : t_(t), n_(n), a_(std::size_t(n) * n), b_(std::size_t(n) * n), c_(std::size_t(n) * n) {
  fill_random_device(a_.get(), static_cast<std::int64_t>(a_.size()), t, 1, 0.0f, nullptr);
  fill_random_device(b_.get(), static_cast<std::int64_t>(b_.size()), t, 2, 0.0f, nullptr);
  FS_CUBLAS_CHECK(cublasCreate(&handle_));
}

GemmPeak::~GemmPeak() {
  if (handle_) cublasDestroy(handle_);
}

void GemmPeak::launch(cudaStream_t stream) {
  const cudaDataType_t dt = t_ == DType::fp16 ? CUDA_R_16F : CUDA_R_16BF;
  const float one = 1.0f, zero = 0.0f;
  FS_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  FS_CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n_, n_, n_, &one, a_.get(), dt,
                               n_, b_.get(), dt, n_, &zero, c_.get(), dt, n_, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
}

CopyPeak::CopyPeak(std::int64_t bytes)
    : src_(static_cast<std::size_t>(bytes)), dst_(static_cast<std::size_t>(bytes)) {
  fill_random_device(src_.get(), bytes / 2, DType::fp16, 3, 0.0f, nullptr);
}

void CopyPeak::launch(cudaStream_t stream) {
  FS_CUDA_CHECK(
      cudaMemcpyAsync(dst_.get(), src_.get(), src_.bytes(), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace flashsteps
