#include "flashsteps/peaks.hpp"

#include <cublas_v2.h>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_buffer.hpp"
#include "flashsteps/device_fill.hpp"

namespace flashsteps {

PeakResult measure_gemm_peak(const DeviceInfo& dev, DType t, int n, int iters,
                             cudaStream_t stream) {
  const std::size_t elems = static_cast<std::size_t>(n) * n;
  DeviceBuffer<std::uint16_t> a(elems), b(elems), c(elems);
  fill_random_device(a.get(), static_cast<std::int64_t>(elems), t, 1, stream);
  fill_random_device(b.get(), static_cast<std::int64_t>(elems), t, 2, stream);
  cublasHandle_t handle;
  FS_CUBLAS_CHECK(cublasCreate(&handle));
  FS_CUBLAS_CHECK(cublasSetStream(handle, stream));
  const cudaDataType_t dt = t == DType::fp16 ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&](cudaStream_t) {
    FS_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(), dt, n,
                                 b.get(), dt, n, &beta, c.get(), dt, n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
  };
  L2Flusher flusher(dev);
  PeakResult r;
  try {
    r.time = summarize(time_launches(gemm, stream, flusher, 3, iters));
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  FS_CUBLAS_CHECK(cublasDestroy(handle));
  r.per_second = 2.0 * n * static_cast<double>(n) * n / (r.time.median_ms * 1e-3);
  return r;
}

PeakResult measure_copy_peak(const DeviceInfo& dev, std::int64_t bytes, int iters,
                             cudaStream_t stream) {
  DeviceBuffer<unsigned char> src(static_cast<std::size_t>(bytes)),
      dst(static_cast<std::size_t>(bytes));
  fill_random_device(src.get(), bytes / 2, DType::fp16, 3, stream);
  auto copy = [&](cudaStream_t s) {
    FS_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), static_cast<std::size_t>(bytes),
                                  cudaMemcpyDeviceToDevice, s));
  };
  L2Flusher flusher(dev);
  PeakResult r;
  r.time = summarize(time_launches(copy, stream, flusher, 3, iters));
  r.per_second = 2.0 * static_cast<double>(bytes) / (r.time.median_ms * 1e-3);
  return r;
}

}  // namespace flashsteps
