// =================================================================================================
// Stage 00 — scalar baseline: attention as three plain kernels, S in global memory.
//
// What this stage is (it has no parent): the definition, executed literally.
//     S = scale · Q Kᵀ          (scores_kernel:  one thread per element of S, fp32 dot over D)
//     P = softmax_rows(S)       (row_softmax:    one block per row of S, in place, writes LSE)
//     O = P V                   (pv_kernel:      one thread per element of O, fp32 dot over Skv)
// S (and then P, in the same buffer) is an fp32 [B·H, Sq, Skv] tensor in global memory.
//
//! [prediction]
// Which metric should move (written before measuring): nothing yet — this is the baseline the
// later stages are measured against. For this stage itself:
//  * every kernel is bound by DRAM/L2 traffic, not arithmetic;
//  * the softmax kernel moves 3 reads + 1 write of S (16·Sq·Skv bytes per head) and runs near the
//    measured copy bandwidth;
//  * the scores and P·V kernels show high L2 and low tensor-pipe (zero: no tensor cores)
//    utilisation;
//  * well under 5% of the measured fp16 tensor peak.
//! [prediction]
//
// Limits: D <= 256, fp16 and bf16, causal or not, any Sq, Skv >= 1 while the fp32 S workspace
// (4·B·H·Sq·Skv bytes) fits in device memory (checked before launch). The reasoning behind the
// prediction and its verdict: book/chapters/stage_00_scalar.md.
// =================================================================================================
#include <cfloat>
#include <cmath>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/row_softmax.cuh"
#include "flashsteps/cuda_check.hpp"
#include "kernels.cuh"

namespace flashsteps::scalar {
namespace {

//! [scores]
// S[bh, i, j] = scale · Σ_d Q[bh, i, d] · K[bh, j, d]; masked entries get -inf.
// Consecutive threads take consecutive j: Q's row is a broadcast, K's rows are D elements apart.
template <class T, bool kCausal>
__global__ void scores_kernel(const T* __restrict__ q, const T* __restrict__ k,
                              float* __restrict__ s, Shape sh) {
  const std::int64_t total = sh.bh * sh.sq * sh.skv;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t j = idx % sh.skv;
    const std::int64_t i = (idx / sh.skv) % sh.sq;
    const std::int64_t bh = idx / (sh.skv * sh.sq);
    if (j >= causal_kv_end(i, sh.sq, sh.skv, kCausal)) {
      s[idx] = -INFINITY;
      continue;
    }
    const T* qi = q + (bh * sh.sq + i) * sh.d;   // (D) row of Q
    const T* kj = k + (bh * sh.skv + j) * sh.d;  // (D) row of K
    float acc = 0.0f;
    for (std::int64_t d = 0; d < sh.d; ++d)
      acc += to_f32(qi[d]) * to_f32(kj[d]);
    s[idx] = acc * sh.scale;
  }
}
//! [scores]

//! [pv]
// O[bh, i, d] = Σ_j P[bh, i, j] · V[bh, j, d]. Consecutive threads take consecutive d, so the
// reads of V are coalesced and the P row is a broadcast; masked keys (P = 0) are skipped.
template <class T, bool kCausal>
__global__ void pv_kernel(const float* __restrict__ p, const T* __restrict__ v, T* __restrict__ o,
                          Shape sh) {
  const std::int64_t total = sh.bh * sh.sq * sh.d;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t d = idx % sh.d;
    const std::int64_t i = (idx / sh.d) % sh.sq;
    const std::int64_t bh = idx / (sh.d * sh.sq);
    const float* pi = p + (bh * sh.sq + i) * sh.skv;  // (Skv) row of P
    const T* vb = v + bh * sh.skv * sh.d;             // (Skv, D) V of this head
    const std::int64_t end = causal_kv_end(i, sh.sq, sh.skv, kCausal);
    float acc = 0.0f;
    for (std::int64_t j = 0; j < end; ++j)
      acc += pi[j] * to_f32(vb[j * sh.d + d]);
    o[idx] = from_f32<T>(acc);
  }
}
//! [pv]

}  // namespace

template <class T, bool kCausal>
void enqueue(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
  using Tile = ScalarTraits;
  float* s = static_cast<float*>(a.workspace);
  const auto score_blocks =
      grid_size(sh.bh * sh.sq * sh.skv, Tile::kScoreThreads, Tile::kMaxBlocks);
  FS_CUDA_CHECK(launch_kernel(scores_kernel<T, kCausal>, score_blocks, Tile::kScoreThreads, 0,
                              stream, static_cast<const T*>(a.q), static_cast<const T*>(a.k), s,
                              sh));
  //! [softmax]
  // One block per row of S: three passes over the row in global memory (max, sum, normalise),
  // overwriting S with P in place and writing LSE = m + log(l). The kernel is shared with stages
  // 01 and 02 and the cuBLAS baseline: common/include/flashsteps/cuda/row_softmax.cuh.
  launch_row_softmax<float, kCausal>(s, s, a.lse, {sh.bh * sh.sq, sh.sq, sh.skv, sh.skv, sh.skv},
                                     stream);
  //! [softmax]
  const auto pv_blocks = grid_size(sh.bh * sh.sq * sh.d, Tile::kPvThreads, Tile::kMaxBlocks);
  FS_CUDA_CHECK(launch_kernel(pv_kernel<T, kCausal>, pv_blocks, Tile::kPvThreads, 0, stream, s,
                              static_cast<const T*>(a.v), static_cast<T*>(a.o), sh));
}

template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape&) {
  const std::string tag = std::string("<") + dtype_name<T>() + (kCausal ? ",causal>" : ">");
  return {
      {"scores" + tag, reinterpret_cast<const void*>(&scores_kernel<T, kCausal>),
       ScalarTraits::kScoreThreads, 0},
      row_softmax_info<float, kCausal>(),
      {"pv" + tag, reinterpret_cast<const void*>(&pv_kernel<T, kCausal>), ScalarTraits::kPvThreads,
       0},
  };
}

#define FS_INSTANTIATE(T, C)                                                     \
  template void enqueue<T, C>(const Shape&, const AttentionArgs&, cudaStream_t); \
  template std::vector<KernelLaunchInfo> kernel_list<T, C>(const Shape&);
FS_INSTANTIATE(__half, false)
FS_INSTANTIATE(__half, true)
FS_INSTANTIATE(__nv_bfloat16, false)
FS_INSTANTIATE(__nv_bfloat16, true)
#undef FS_INSTANTIATE

}  // namespace flashsteps::scalar
