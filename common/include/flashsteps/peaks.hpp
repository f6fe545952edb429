// flashsteps/peaks.hpp — the ceilings every "% of peak" in this project is relative to,
// measured on the GPU at hand (never a datasheet): a large cuBLAS GEMM and a device-to-device
// copy, timed like everything else (events, L2 flushed, median) by whoever launches them.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "flashsteps/device_buffer.hpp"
#include "flashsteps/problem.hpp"

namespace flashsteps {

/// C = A·B with M = N = K = n, inputs and output in `t`, fp32 accumulation: the tensor-core peak
/// a library reaches on this GPU. Operands are random (never zeros).
class GemmPeak {
 public:
  GemmPeak(DType t, int n);
  ~GemmPeak();
  GemmPeak(const GemmPeak&) = delete;
  GemmPeak& operator=(const GemmPeak&) = delete;
  void launch(cudaStream_t stream);
  double flops() const { return 2.0 * n_ * static_cast<double>(n_) * n_; }

 private:
  DType t_;
  int n_;
  DeviceBuffer<std::uint16_t> a_, b_, c_;
  cublasHandle_t handle_ = nullptr;
};

/// cudaMemcpyAsync of `bytes` device to device: the bandwidth a copy reaches on this GPU.
class CopyPeak {
 public:
  explicit CopyPeak(std::int64_t bytes);
  void launch(cudaStream_t stream);
  /// Bytes read plus bytes written by one copy.
  double bytes_moved() const { return 2.0 * static_cast<double>(src_.bytes()); }

 private:
  DeviceBuffer<unsigned char> src_, dst_;
};

}  // namespace flashsteps
