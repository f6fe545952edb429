// flashsteps/cuda/reduce.cuh — block-wide reductions for the unfused softmax kernels.
#pragma once

#include "flashsteps/mask.hpp"

namespace flashsteps {

/// Reduces `x` over the block with `op` (whole warps, at most 32 of them): warp shuffles, then
/// one warp over the per-warp results. Every thread gets the result. `identity` fills the lanes
/// past the last warp; `scratch` is 32 floats of shared memory, reusable after the call.
template <class Op>
__device__ float block_reduce(float x, Op op, float identity, float* scratch) {
  for (int off = 16; off > 0; off >>= 1)
    x = op(x, __shfl_xor_sync(0xffffffffu, x, off));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : identity;
  for (int off = 16; off > 0; off >>= 1)
    x = op(x, __shfl_xor_sync(0xffffffffu, x, off));
  __syncthreads();  // the next call may overwrite scratch only after everyone has read it
  return x;
}

}  // namespace flashsteps
