#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_fill.hpp"

namespace flashsteps {
namespace {

__device__ float hash_uniform(std::uint64_t i, std::uint64_t seed) {
  // splitmix64: a cheap, well-mixed hash of the index
  std::uint64_t z = i + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-23f - 1.0f;  // 24 bits -> [-1, 1)
}

template <class T>
__global__ void fill_kernel(T* out, std::int64_t n, std::uint64_t seed, float mean) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    if constexpr (std::is_same_v<T, __half>)
      out[i] = __float2half_rn(mean + hash_uniform(i, seed));
    else
      out[i] = __float2bfloat16_rn(mean + hash_uniform(i, seed));
  }
}

}  // namespace

void fill_random_device(void* ptr, std::int64_t n, DType t, std::uint64_t seed, float mean,
                        cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536));
  if (t == DType::fp16)
    FS_CUDA_CHECK(launch_kernel(fill_kernel<__half>, blocks, kThreads, 0, stream,
                                static_cast<__half*>(ptr), n, seed, mean));
  else
    FS_CUDA_CHECK(launch_kernel(fill_kernel<__nv_bfloat16>, blocks, kThreads, 0, stream,
                                static_cast<__nv_bfloat16*>(ptr), n, seed, mean));
}

}  // namespace flashsteps
