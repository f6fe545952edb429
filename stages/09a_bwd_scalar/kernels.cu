// =================================================================================================
// Stage 09a — scalar backward: the gradients of attention as plain kernels, every intermediate in
// global memory.
//
// What this stage is (the first backward step: the root of its own line, no parent): the chain
// rule through O = softmax(scale · Q Kᵀ) V, executed literally. Given dO = dLoss/dO and the
// forward's O and LSE (natural log), per head:
//     D_i   = Σ_d dO_id · O_id              (rowdot_kernel: one thread per query row)
//     S     = scale · Q Kᵀ                  (row_products_kernel: one thread per element of S)
//     P     = exp(S − LSE)                  (probs_kernel:  in place over S; P recomputed from LSE)
//     dP    = dO Vᵀ                         (row_products_kernel, on dO and V)
//     dS    = P ∘ (dP − D)                  (ds_kernel:     in place over dP)
//     dV    = Pᵀ dO                         (transposed_product_kernel: one thread per element)
//     dK    = scale · dSᵀ Q                 (transposed_product_kernel, on dS and Q)
//     dQ    = scale · dS K                  (dq_kernel:     one thread per element of dQ)
// S/P and dP/dS are fp32 [B·H, Sq, Skv] tensors in global memory, D an fp32 [B·H, Sq] one. Every
// output element is written by exactly one thread, summing in a fixed order: no atomics, and the
// result is bitwise the same from run to run.
//
//! [prediction]
// Which metric should move (written before measuring, before any GPU run): this is the baseline
// the later backward steps are measured against. For this stage itself:
//  * like stage 00, every kernel is bound by DRAM/L2 traffic over the Sq·Skv matrices, not by
//    arithmetic; it moves them about three times as often as stage 00 (S, P, dP, dS written or
//    read in five kernels, and dV, dK, dQ each reading one of them once per column of D);
//  * its time at a shape is 2.5 to 6 times stage 00's forward at the same shape;
//  * at FlashAttention's backward FLOP count (2.5 times the forward's) that is well under 5% of
//    the measured fp16 tensor peak (no tensor cores).
//! [prediction]
//
// Limits: D <= 256, fp16 and bf16, causal or not, any Sq, Skv >= 1 while the fp32 workspace
// (8·B·H·Sq·Skv + 4·B·H·Sq bytes) fits in device memory (checked before launch). Rows that see no
// key (causal, Sq > Skv) have LSE = -inf and O = 0: their P is 0 by definition, never
// exp(-inf + inf), and their dQ is 0. The derivation and the chapter:
// book/chapters/stage_09a_bwd_scalar.md.
// =================================================================================================
#include <cfloat>
#include <cmath>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::bwd_scalar {
namespace {

// A flat grid-stride loop over n elements: f(idx) for each.
#define FS_FOR_EACH_ELEMENT(idx, n)                                                       \
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < (n); \
       idx += std::int64_t{gridDim.x} * blockDim.x)

//! [rowdot]
// D[bh, i] = Σ_d dO[bh, i, d] · O[bh, i, d]: the row sum that stands for Σ_j P_ij dP_ij.
template <class T>
__global__ void rowdot_kernel(const T* __restrict__ dout, const T* __restrict__ o,
                              float* __restrict__ dsum, Shape sh) {
  FS_FOR_EACH_ELEMENT(row, sh.bh * sh.sq) {
    const T* doi = dout + row * sh.d;  // (D) row of dO
    const T* oi = o + row * sh.d;      // (D) row of O
    float acc = 0.0f;
    for (std::int64_t d = 0; d < sh.d; ++d)
      acc += to_f32(doi[d]) * to_f32(oi[d]);
    dsum[row] = acc;
  }
}
//! [rowdot]

//! [products]
// out[bh, i, j] = factor · Σ_d X[bh, i, d] · Y[bh, j, d] over the visible (i, j); a masked entry
// gets `masked`. S = scale · Q Kᵀ (masked: -inf) and dP = dO Vᵀ (masked: 0, as its P is) are
// this one product, one thread per element as stage 00's scores kernel.
template <class T, bool kCausal>
__global__ void row_products_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                    float* __restrict__ out, float factor, float masked, Shape sh) {
  FS_FOR_EACH_ELEMENT(idx, sh.bh * sh.sq * sh.skv) {
    const std::int64_t j = idx % sh.skv;
    const std::int64_t i = (idx / sh.skv) % sh.sq;
    const std::int64_t bh = idx / (sh.skv * sh.sq);
    if (j >= causal_kv_end(i, sh.sq, sh.skv, kCausal)) {
      out[idx] = masked;
      continue;
    }
    const T* xi = x + (bh * sh.sq + i) * sh.d;   // (D) row of Q or dO
    const T* yj = y + (bh * sh.skv + j) * sh.d;  // (D) row of K or V
    float acc = 0.0f;
    for (std::int64_t d = 0; d < sh.d; ++d)
      acc += to_f32(xi[d]) * to_f32(yj[d]);
    out[idx] = acc * factor;
  }
}
//! [products]

//! [probs]
// P[bh, i, j] = exp(S[bh, i, j] − LSE[bh, i]), in place: the forward's softmax, recomputed from
// the one number per row it saved. A row that sees no key has P = 0 (its LSE is -inf).
template <bool kCausal>
__global__ void probs_kernel(float* __restrict__ s, const float* __restrict__ lse, Shape sh) {
  FS_FOR_EACH_ELEMENT(idx, sh.bh * sh.sq * sh.skv) {
    const std::int64_t j = idx % sh.skv;
    const std::int64_t row = idx / sh.skv;  // bh * Sq + i
    const std::int64_t i = row % sh.sq;
    s[idx] = j < causal_kv_end(i, sh.sq, sh.skv, kCausal) ? expf(s[idx] - lse[row]) : 0.0f;
  }
}
//! [probs]

//! [ds]
// dS[bh, i, j] = P[bh, i, j] · (dP[bh, i, j] − D[bh, i]), in place over dP: the softmax's
// Jacobian applied to dP, one row at a time.
__global__ void ds_kernel(const float* __restrict__ p, float* __restrict__ dp,
                          const float* __restrict__ dsum, Shape sh) {
  FS_FOR_EACH_ELEMENT(idx, sh.bh * sh.sq * sh.skv) {
    dp[idx] = p[idx] * (dp[idx] - dsum[idx / sh.skv]);
  }
}
//! [ds]

//! [grads]
// dV[bh, j, d] = Σ_i P[bh, i, j] · dO[bh, i, d] and dK[bh, j, d] = scale · Σ_i dS[bh, i, j] ·
// Q[bh, i, d]: out = factor · Mᵀ Y, one thread per element. Consecutive threads take consecutive
// d: the reads of Y are coalesced and the column of M is a broadcast. Masked entries of P and dS
// are 0.
template <class T>
__global__ void transposed_product_kernel(const float* __restrict__ m, const T* __restrict__ y,
                                          T* __restrict__ out, float factor, Shape sh) {
  FS_FOR_EACH_ELEMENT(idx, sh.bh * sh.skv * sh.d) {
    const std::int64_t d = idx % sh.d;
    const std::int64_t j = (idx / sh.d) % sh.skv;
    const std::int64_t bh = idx / (sh.d * sh.skv);
    const float* mj = m + bh * sh.sq * sh.skv + j;  // column j of M, stride Skv
    const T* yb = y + bh * sh.sq * sh.d;            // (Sq, D) Y of this head
    float acc = 0.0f;
    for (std::int64_t i = 0; i < sh.sq; ++i)
      acc += mj[i * sh.skv] * to_f32(yb[i * sh.d + d]);
    out[idx] = from_f32<T>(acc * factor);
  }
}

// dQ[bh, i, d] = scale · Σ_j dS[bh, i, j] · K[bh, j, d], over the keys row i sees.
template <class T, bool kCausal>
__global__ void dq_kernel(const float* __restrict__ ds, const T* __restrict__ k, T* __restrict__ dq,
                          Shape sh) {
  FS_FOR_EACH_ELEMENT(idx, sh.bh * sh.sq * sh.d) {
    const std::int64_t d = idx % sh.d;
    const std::int64_t i = (idx / sh.d) % sh.sq;
    const std::int64_t bh = idx / (sh.d * sh.sq);
    const float* dsi = ds + (bh * sh.sq + i) * sh.skv;  // (Skv) row of dS
    const T* kb = k + bh * sh.skv * sh.d;               // (Skv, D) K of this head
    const std::int64_t end = causal_kv_end(i, sh.sq, sh.skv, kCausal);
    float acc = 0.0f;
    for (std::int64_t j = 0; j < end; ++j)
      acc += dsi[j] * to_f32(kb[j * sh.d + d]);
    dq[idx] = from_f32<T>(acc * sh.scale);
  }
}
//! [grads]

#undef FS_FOR_EACH_ELEMENT

}  // namespace

std::int64_t workspace_bytes(const Shape& sh) {
  return 2 * 4 * sh.bh * sh.sq * sh.skv + 4 * sh.bh * sh.sq;
}

template <class T, bool kCausal>
void enqueue(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
  using Tile = BwdScalarTraits;
  const std::int64_t matrix = sh.bh * sh.sq * sh.skv;
  float* s = static_cast<float*>(a.workspace);  // S, then P
  float* dp = s + matrix;                       // dP, then dS
  float* dsum = dp + matrix;                    // D
  const auto* q = static_cast<const T*>(a.q);
  const auto* k = static_cast<const T*>(a.k);
  const auto* v = static_cast<const T*>(a.v);
  const auto* o = static_cast<const T*>(a.o);
  const auto* dout = static_cast<const T*>(a.dout);
  auto blocks = [](std::int64_t n) { return grid_size(n, Tile::kThreads, Tile::kMaxBlocks); };
  //! [enqueue]
  FS_CUDA_CHECK(launch_kernel(rowdot_kernel<T>, blocks(sh.bh * sh.sq), Tile::kThreads, 0, stream,
                              dout, o, dsum, sh));
  FS_CUDA_CHECK(launch_kernel(row_products_kernel<T, kCausal>, blocks(matrix), Tile::kThreads, 0,
                              stream, q, k, s, sh.scale, -INFINITY, sh));  // S = scale Q Kᵀ
  FS_CUDA_CHECK(launch_kernel(probs_kernel<kCausal>, blocks(matrix), Tile::kThreads, 0, stream, s,
                              static_cast<const float*>(a.lse), sh));
  FS_CUDA_CHECK(launch_kernel(row_products_kernel<T, kCausal>, blocks(matrix), Tile::kThreads, 0,
                              stream, dout, v, dp, 1.0f, 0.0f, sh));  // dP = dO Vᵀ
  FS_CUDA_CHECK(
      launch_kernel(ds_kernel, blocks(matrix), Tile::kThreads, 0, stream, s, dp, dsum, sh));
  const std::int64_t kv = sh.bh * sh.skv * sh.d, qo = sh.bh * sh.sq * sh.d;
  FS_CUDA_CHECK(launch_kernel(transposed_product_kernel<T>, blocks(kv), Tile::kThreads, 0, stream,
                              s, dout, static_cast<T*>(a.dv), 1.0f, sh));  // dV = Pᵀ dO
  FS_CUDA_CHECK(launch_kernel(transposed_product_kernel<T>, blocks(kv), Tile::kThreads, 0, stream,
                              dp, q, static_cast<T*>(a.dk), sh.scale, sh));  // dK

  FS_CUDA_CHECK(launch_kernel(dq_kernel<T, kCausal>, blocks(qo), Tile::kThreads, 0, stream, dp, k,
                              static_cast<T*>(a.dq), sh));
  //! [enqueue]
}

template <class T, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape&) {
  const std::string tag = std::string("<") + dtype_name<T>() + (kCausal ? ",causal>" : ">");
  const int n = BwdScalarTraits::kThreads;
  auto info = [&](const char* name, const void* f) {
    return KernelLaunchInfo{name + tag, f, n, 0};
  };
  return {
      info("rowdot", reinterpret_cast<const void*>(&rowdot_kernel<T>)),
      info("scores", reinterpret_cast<const void*>(&row_products_kernel<T, kCausal>)),
      info("probs", reinterpret_cast<const void*>(&probs_kernel<kCausal>)),
      info("dp", reinterpret_cast<const void*>(&row_products_kernel<T, kCausal>)),
      info("ds", reinterpret_cast<const void*>(&ds_kernel)),
      info("dv", reinterpret_cast<const void*>(&transposed_product_kernel<T>)),
      info("dk", reinterpret_cast<const void*>(&transposed_product_kernel<T>)),
      info("dq", reinterpret_cast<const void*>(&dq_kernel<T, kCausal>)),
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

}  // namespace flashsteps::bwd_scalar
