// flashsteps/cuda/row_softmax.cuh — the row softmax of the unfused stages (00, 01, 02) and of the
// cuBLAS baseline: one kernel, one definition of the masking and of the rows that see no key.
//
//     P[r, :] = softmax(S[r, 0:end))   and zeros past `end`,   LSE[r] = m + log(l)
//
// where r is a flat row of S ([B·H·Sq, Skv] fp32, row pitch lds >= Skv) and end = the causal
// kv_end of the row's query index (Skv without a mask). Only S[r, 0:end) is read: the producer
// of S need not write masked scores, nor the columns [Skv, lds) of a padded pitch. P is written on
// the whole row pitch [0, ldp): zeros at and past `end`, so the P·V kernel that follows may read
// any column below ldp.
//
// P's element type picks the variant:
//   PT = float                 in place (p == s, lds == ldp == Skv): stages 00 and 01.
//   PT = __half/__nv_bfloat16  a separate buffer in the input dtype, so P·V can run on tensor
//                              cores: stage 02 (lds = Skv) and the cuBLAS baseline (S and P both
//                              padded to a multiple of 8 elements, cuBLAS's 16-byte rule).
// Because in place is allowed, `s` and `p` are not __restrict__: each element is read and then
// overwritten by the same thread in the last pass, so the aliasing is harmless but real.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/reduce.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/mask.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps {

/// Launch shape of the row softmax: one block per row of S, a grid-stride loop past kMaxBlocks.
struct RowSoftmaxTraits {
  static constexpr int kThreads = 256;                // threads per block (one row at a time)
  static constexpr long long kMaxBlocks = 1LL << 20;  // grid-stride over rows beyond this
  static_assert(kThreads % 32 == 0 && kThreads <= 1024,
                "block_reduce assumes whole warps, at most 32 of them");
};

/// Shape of one row-softmax call (64-bit: B·H·Sq·Skv overflows 32 bits at S = 16k).
struct RowSoftmaxShape {
  long long rows;  ///< B·H·Sq rows of S
  long long sq;    ///< queries per head: the row's query index is row % sq
  long long skv;   ///< keys per row
  long long lds;   ///< S's row pitch in elements, >= skv; columns [skv, lds) are never read
  long long ldp;   ///< P's row pitch in elements, >= skv; columns [skv, ldp) are written 0
};

namespace detail {
template <class PT>
__device__ inline PT to_p(float x) {
  if constexpr (std::is_same_v<PT, float>)
    return x;
  else
    return from_f32<PT>(x);
}
}  // namespace detail

//! [row_softmax]
// One block per row of S: three passes over the row in global memory (max, sum, normalise) and
// LSE = m + log(l). A row that sees no key (causal with Sq > Skv) has m = -inf: it gets P = 0 and
// LSE = -inf, never exp(-inf - -inf) = NaN.
template <class PT, bool kCausal>
__global__ void __launch_bounds__(RowSoftmaxTraits::kThreads)
    row_softmax_kernel(const float* s, PT* p, float* __restrict__ lse, RowSoftmaxShape sh) {
  __shared__ float scratch[32];
  for (long long row = blockIdx.x; row < sh.rows; row += gridDim.x) {
    const float* sr = s + row * sh.lds;  // (Skv) row of S
    PT* pr = p + row * sh.ldp;           // (ldp) row of P; may be the same memory as sr
    const long long end = causal_kv_end(row % sh.sq, sh.sq, sh.skv, kCausal);
    float m = -INFINITY;
    for (long long j = threadIdx.x; j < end; j += blockDim.x)
      m = fmaxf(m, sr[j]);
    m = block_reduce(
        m, [](float a, float b) { return fmaxf(a, b); }, -INFINITY, scratch);
    float l = 0.0f;
    if (m != -INFINITY) {
      for (long long j = threadIdx.x; j < end; j += blockDim.x)
        l += expf(sr[j] - m);
    }
    l = block_reduce(
        l, [](float a, float b) { return a + b; }, 0.0f, scratch);
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
    // Same j per thread as the passes above: in place, each element is read before it is written.
    for (long long j = threadIdx.x; j < sh.ldp; j += blockDim.x) {
      pr[j] = detail::to_p<PT>(j < end ? expf(sr[j] - m) * inv_l : 0.0f);
    }
    if (threadIdx.x == 0) lse[row] = l > 0.0f ? m + logf(l) : -INFINITY;
  }
}
//! [row_softmax]

/// Enqueues the row softmax on `stream`. In place (PT = float) needs p == s and ldp == lds.
template <class PT, bool kCausal>
void launch_row_softmax(const float* s, PT* p, float* lse, const RowSoftmaxShape& sh,
                        cudaStream_t stream) {
  if (sh.lds < sh.skv || sh.ldp < sh.skv ||
      (static_cast<const void*>(p) == s && sh.ldp != sh.lds)) {
    throw std::invalid_argument(
        "launch_row_softmax: S's and P's row pitches must be >= Skv, and equal "
        "when P overwrites S in place");
  }
  const long long blocks =
      sh.rows < RowSoftmaxTraits::kMaxBlocks ? sh.rows : RowSoftmaxTraits::kMaxBlocks;
  FS_CUDA_CHECK(launch_kernel(row_softmax_kernel<PT, kCausal>, blocks, RowSoftmaxTraits::kThreads,
                              0, stream, s, p, lse, sh));
}

/// The row softmax as a stage lists it among its kernels: "softmax<fp16,causal>".
template <class PT, bool kCausal>
KernelLaunchInfo row_softmax_info() {
  std::string name = "softmax<";
  if constexpr (std::is_same_v<PT, float>)
    name += "fp32";
  else
    name += dtype_name<PT>();
  name += kCausal ? ",causal>" : ">";
  return {name, reinterpret_cast<const void*>(&row_softmax_kernel<PT, kCausal>),
          RowSoftmaxTraits::kThreads, 0};
}

}  // namespace flashsteps
