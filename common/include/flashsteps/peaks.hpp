// flashsteps/peaks.hpp — the ceilings every "% of peak" in this project is relative to,
// measured on the GPU at hand (never a datasheet): a large cuBLAS GEMM and a device-to-device
// copy, timed like everything else (events, L2 flushed, median).
#pragma once

#include <cuda_runtime.h>

#include "flashsteps/device_info.hpp"
#include "flashsteps/problem.hpp"
#include "flashsteps/timing.hpp"

namespace flashsteps {

struct PeakResult {
  TimingStats time;
  double per_second = 0;  ///< FLOP/s for the GEMM, bytes/s (read + written) for the copy
};

/// C = A·B with M = N = K = `n`, inputs in `t`, fp32 accumulation, fp16/bf16 output (tensor cores).
PeakResult measure_gemm_peak(const DeviceInfo& dev, DType t, int n, int iters, cudaStream_t stream);
/// cudaMemcpyAsync device to device of `bytes`; counts 2*bytes moved per copy.
PeakResult measure_copy_peak(const DeviceInfo& dev, std::int64_t bytes, int iters,
                             cudaStream_t stream);

}  // namespace flashsteps
