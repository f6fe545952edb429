// flashsteps/cuda/dtype.cuh — the runtime dtype picks a template once, at the launcher.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
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

/// The head dimensions a stage instantiates its kernels for: the check its supports() reports and
/// the one switch from the runtime D to a template argument.
template <int... kDims>
struct HeadDims {
  static constexpr bool contains(std::int64_t d) { return ((d == kDims) || ...); }
  /// "{64, 128}"
  static std::string list() {
    std::string s;
    ((s += (s.empty() ? "" : ", ") + std::to_string(kDims)), ...);
    return "{" + s + "}";
  }
  /// Empty when supported, else the message naming the supported set.
  static std::string why_not(std::int64_t d) {
    if (contains(d)) return {};
    return "head_dim " + std::to_string(d) + " is not supported: D must be one of " + list();
  }
  /// Calls f.template operator()<D>() once for every D in the set.
  template <class F>
  static void for_each(F&& f) {
    (f.template operator()<kDims>(), ...);
  }
  /// Calls f.template operator()<D>() with D == d; throws (a bug: supports() refuses first).
  template <class F>
  static decltype(auto) dispatch(std::int64_t d, F&& f) {
    return dispatch_impl<kDims...>(d, f);
  }

 private:
  template <int kFirst, int... kRest, class F>
  static decltype(auto) dispatch_impl(std::int64_t d, F& f) {
    if (d == kFirst) return f.template operator()<kFirst>();
    if constexpr (sizeof...(kRest) > 0) {
      return dispatch_impl<kRest...>(d, f);
    } else {
      throw std::invalid_argument(why_not(d));
    }
  }
};

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

/// The constants of the online softmax in base 2 (exp2 on the SFU, with the scale folded in):
/// scores are multiplied by scale * kLog2e, and a row's LSE comes back to the natural log with
/// kLn2.
inline constexpr float kLog2e = 1.4426950408889634f;  // log2(e)
inline constexpr float kLn2 = 0.693147180559945309f;  // ln(2)
/// Every lane of a warp, for the __shfl_*_sync reductions over a row.
inline constexpr unsigned kFullMask = 0xffffffffu;

/// Ceiling of a / b for positive b: tiles covering a length, blocks covering work.
__host__ __device__ constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

/// Blocks of a grid-stride launch: enough blocks of `per_block` items for `work` items, at most
/// `max_blocks` (the kernels loop over what remains).
inline unsigned grid_size(std::int64_t work, std::int64_t per_block, std::int64_t max_blocks) {
  const std::int64_t blocks = ceil_div(work, per_block);
  return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

/// Two fp32 values rounded to T and packed into one 32-bit word (.f16x2 / .bf16x2), `lo` in the low
/// half: the lower address of a 16-byte store, and the lower column of an mma fragment register.
/// One cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32; each half rounds exactly as from_f32<T> does.
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);  // .x = lo, .y = hi
    return std::uint32_t{__half_as_ushort(h.x)} | (std::uint32_t{__half_as_ushort(h.y)} << 16);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return std::uint32_t{__bfloat16_as_ushort(h.x)} |
           (std::uint32_t{__bfloat16_as_ushort(h.y)} << 16);
  }
}

template <class T>
constexpr const char* dtype_name() {
  return std::is_same_v<T, __half> ? "fp16" : "bf16";
}

}  // namespace flashsteps
