// flashsteps/device_fill.hpp — random device data for buffers too large to fill from the host
// (the peak GEMM's operands). Never time on zeros: a matrix unit can run faster on them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flashsteps/problem.hpp"

namespace flashsteps {

/// Fills n elements of dtype `t` with hash-based uniform values in [mean - 1, mean + 1).
void fill_random_device(void* ptr, std::int64_t n, DType t, std::uint64_t seed, float mean,
                        cudaStream_t stream);

}  // namespace flashsteps
