// flashsteps/cuda/dtype.cuh — the runtime dtype picks a template once, at the launcher.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "flashsteps/problem.hpp"

namespace flashsteps {

/// Calls f.template operator()<T>() with T = __half or __nv_bfloat16.
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  if (t == DType::fp16) return f.template operator()<__half>();
  return f.template operator()<__nv_bfloat16>();
}

/// Calls f.template operator()<B>() with B = the runtime bool, so kernels take it as a template.
template <class F>
decltype(auto) dispatch_bool(bool b, F&& f) {
  if (b) return f.template operator()<true>();
  return f.template operator()<false>();
}

template <class T>
__host__ __device__ inline float to_f32(T x) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(x);
  else
    return __bfloat162float(x);
}

template <class T>
__host__ __device__ inline T from_f32(float x) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(x);
  else
    return __float2bfloat16_rn(x);
}

template <class T>
constexpr const char* dtype_name() {
  return std::is_same_v<T, __half> ? "fp16" : "bf16";
}

}  // namespace flashsteps
