// =================================================================================================
// Stage 09b — fused backward: FlashAttention-2's backward pass (Dao 2023, Algorithm 2), on CUDA
// cores.
//
// What changed since stage 09a:
//  * S, P, dP and dS never reach global memory. One block per (head, K/V tile j) keeps K_j and V_j
//    in shared memory and dK_j, dV_j in registers, and walks the query tiles i: per tile it loads
//    Q_i, dO_i, LSE_i and D_i, recomputes P_ij = exp(S_ij − LSE_i) from the one number per row the
//    forward saved, and makes the five products of 09a on the (Br, Bc) tile in shared memory.
//  * dQ_i gets a share from every K/V tile, and the blocks of different j run at the same time:
//    each adds its share into an fp32 accumulator [B·H, Sq, D] in the workspace with atomicAdd,
//    and a last kernel converts the sums to the dtype. The first kernel computes D = rowsum(dO ∘ O)
//    as 09a's did and zeroes the accumulator.
//  * Causal: a K/V tile is visited only by the query tiles that see one of its keys; the walk
//    starts at the first of them (first_query_tile), and the tiles before it are skipped.
//  * Eight kernels become three; the workspace shrinks from 8·B·H·Sq·Skv bytes to 4·B·H·Sq·(D+1).
//
//! [prediction]
// Which metric should move (written before measuring, before any GPU run). Per (i, j) tile pair the
// block makes the five products of 09a — S and dP (Br·Bc·D MACs each), dV, dK (Bc·D·Br each) and
// dQ (Br·D·Bc) — with scalar fp32 FMAs whose operands come from shared memory (one operand a
// broadcast, the other conflict-free), and Br·D atomic adds for dQ. Nothing of size Sq·Skv moves
// through DRAM. So:
//  * the stage is bound by shared-memory loads and FMA issue, not by DRAM: its time at S = 2048 is
//    3 to 30 times shorter than 09a's at the same shape (09a moves ~16 bytes of fp32 matrices per
//    (i, j) element five times over; this stage reads each shared operand once per MAC);
//  * at FlashAttention's backward FLOP count that is 0.5% to 5% of the measured fp16 tensor peak
//    (an H100's fp32 FMA rate is under a tenth of its fp16 tensor rate, and shared-memory loads
//    halve it again);
//  * the dQ atomics (Tc adds per element of dQ, Tc = Skv / 32) cost under a third of the time:
//    Br·D = 2k–4k reductions per tile pair against 5·Br·Bc·D = 320k–640k FMAs.
//! [prediction]
//
// Limits: D = 64 and 128, fp16 and bf16, causal or not, any Sq, Skv >= 1; B·H·⌈Skv/32⌉ < 2^31
// blocks; the fp32 accumulator and D (4·B·H·Sq·(D+1) bytes) must fit in device memory. dQ is not
// bitwise reproducible on a GPU: the order in which the blocks' atomic adds reach an element of the
// accumulator changes from run to run, and fp32 addition is not associative (dK and dV are: one
// block sums each in a fixed order). The emulator runs the blocks in one seeded order, so its runs
// repeat. Rows that see no key (causal, Sq > Skv) get dQ = 0 from the zeroed accumulator; keys no
// row sees get dK = dV = 0. The loops over a thread's elements are unrolled (dK_j's and dV_j's
// 2·Bc·D/128 = 32 or 64 accumulators per thread stay in registers); the sums inside them by 8 only:
// unrolled whole, ptxas took minutes per architecture and spilled at D = 128. Registers and spills:
// the build's resources/09b_bwd_fused.ptxas.txt. The chapter: book/chapters/stage_09b_bwd_fused.md.
// =================================================================================================
#include <cfloat>
#include <cmath>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::bwd_fused {
namespace {

constexpr int kRowThreads = 256;  // the row kernels: one thread per row, element

//! [dot_do_o]
// D[bh, i] = Σ_d dO[bh, i, d] · O[bh, i, d] (09a's rowdot, summed in the same order), and row i
// of dQ's accumulator set to 0: the fused kernel only adds into it.
template <class T>
__global__ void dot_do_o_kernel(const T* __restrict__ dout, const T* __restrict__ o,
                                float* __restrict__ dsum, float* __restrict__ dq_accum,
                                std::int64_t rows, int d_head) {
  const std::int64_t row = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (row >= rows) return;
  const T* doi = dout + row * d_head;  // (D) row of dO
  const T* oi = o + row * d_head;      // (D) row of O
  float acc = 0.0f;
  for (int d = 0; d < d_head; ++d) {
    acc += to_f32(doi[d]) * to_f32(oi[d]);
    dq_accum[row * d_head + d] = 0.0f;
  }
  dsum[row] = acc;
}
//! [dot_do_o]

// Rows [row0, row0 + kRows) of a head's (n_rows, D) matrix into a shared tile with leading
// dimension ld; rows at or past n_rows become zeros (never read from global memory).
template <int kRows, int kD, int kThreads, class T>
__device__ __forceinline__ void load_rows(T* __restrict__ dst, int ld, const T* __restrict__ src,
                                          std::int64_t row0, std::int64_t n_rows) {
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kD; e += kThreads) {
    const int r = e / kD, c = e % kD;
    dst[r * ld + c] = row0 + r < n_rows ? src[(row0 + r) * kD + c] : from_f32<T>(0.0f);
  }
}

//! [first_query_tile]
// The first query tile whose rows see a key of the K/V tile that starts at key kv0. Row i sees keys
// [0, causal_kv_end(i)), and causal_kv_end grows with i, so the rows that see key kv0 — and with it
// any key of the tile — are those from i = kv0 + Sq − Skv on (flashsteps/mask.hpp). Without the
// causal mask every row sees every key: the walk starts at tile 0.
template <int kBr, bool kCausal>
__device__ __forceinline__ int first_query_tile(std::int64_t kv0, const Shape& sh) {
  if (!kCausal) return 0;
  const std::int64_t first_row = kv0 + sh.sq - sh.skv;  // the first row that sees key kv0
  return first_row <= 0 ? 0 : static_cast<int>(first_row / kBr);
}
//! [first_query_tile]

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads)
    fused_backward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const T* __restrict__ dout, const float* __restrict__ lse,
                          const float* __restrict__ dsum, float* __restrict__ dq_accum,
                          T* __restrict__ dk, T* __restrict__ dv, Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc, kThreads = Tile::kThreads;
  constexpr int kLdKV = Tile::kLdKV;

  FS_DYNAMIC_SHARED(__align__(16) unsigned char, smem);
  T* sK = reinterpret_cast<T*>(smem + Tile::kOffK);                  // (Bc, D) dtype: K_j
  T* sV = reinterpret_cast<T*>(smem + Tile::kOffV);                  // (Bc, D) dtype: V_j
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);                  // (Br, D) dtype: Q_i
  T* sdO = reinterpret_cast<T*>(smem + Tile::kOffDO);                // (Br, D) dtype: dO_i
  float* sP = reinterpret_cast<float*>(smem + Tile::kOffP);          // (Br, Bc) fp32: P_ij
  float* sdS = reinterpret_cast<float*>(smem + Tile::kOffDS);        // (Br, Bc) fp32: dS_ij
  float* sLse = reinterpret_cast<float*>(smem + Tile::kOffLse);      // (Br) fp32: LSE_i
  float* sDelta = reinterpret_cast<float*>(smem + Tile::kOffDelta);  // (Br) fp32: D_i

  // One block per (head, K/V tile j), the tiles of a head adjacent in launch order.
  const std::int64_t tc = (sh.skv + Bc - 1) / Bc;
  const int j = static_cast<int>(blockIdx.x % static_cast<unsigned long long>(tc));
  const std::int64_t bh = blockIdx.x / static_cast<unsigned long long>(tc);  // b*H + h
  const std::int64_t kv0 = std::int64_t{j} * Bc;                             // first key of K_j
  const T* q_head = q + bh * sh.sq * D;                                      // (Sq, D) of this head
  const T* do_head = dout + bh * sh.sq * D;                                  // (Sq, D)
  const float* lse_head = lse + bh * sh.sq;                                  // (Sq)
  const float* dsum_head = dsum + bh * sh.sq;                                // (Sq)
  float* dq_head = dq_accum + bh * sh.sq * D;                                // (Sq, D) fp32
  const int tid = static_cast<int>(threadIdx.x);

  //! [load_kv]
  // K_j and V_j stay in shared memory for the whole walk.
  load_rows<Bc, D, kThreads>(sK, kLdKV, k + bh * sh.skv * D, kv0, sh.skv);
  load_rows<Bc, D, kThreads>(sV, kLdKV, v + bh * sh.skv * D, kv0, sh.skv);
  //! [load_kv]

  // This thread's elements of dK_j and dV_j: e = tid + kThreads·t is (key c, column d) with
  // c = e / D, d = e % D — a warp holds 32 consecutive columns of one key.
  float dk_acc[Tile::kPerThreadKV] = {};  // (Bc, D) fp32, this thread's share: dK_j / scale
  float dv_acc[Tile::kPerThreadKV] = {};  // (Bc, D) fp32, this thread's share: dV_j

  const int tr = static_cast<int>((sh.sq + Br - 1) / Br);
  //! [walk]
  for (int i = first_query_tile<Br, kCausal>(kv0, sh); i < tr; ++i) {
    const std::int64_t row0 = std::int64_t{i} * Br;  // first row of Q_i
    // (A) Every thread is done with the last tile's Q_i, dO_i, P_ij, dS_ij (and, at the first
    // tile, has stored its K_j, V_j rows) before they are overwritten or read.
    __syncthreads();
    load_rows<Br, D, kThreads>(sQ, D, q_head, row0, sh.sq);
    load_rows<Br, D, kThreads>(sdO, D, do_head, row0, sh.sq);
    for (int r = tid; r < Br; r += kThreads) {
      sLse[r] = row0 + r < sh.sq ? lse_head[row0 + r] : 0.0f;
      sDelta[r] = row0 + r < sh.sq ? dsum_head[row0 + r] : 0.0f;
    }
    __syncthreads();  // (B) Q_i, dO_i, LSE_i, D_i are in shared memory
                      //! [walk]

    //! [recompute]
    // P_ij = exp(S_ij − LSE_i), dP_ij = dO_i V_jᵀ, dS_ij = P_ij ∘ (dP_ij − D_i) on the (Br, Bc)
    // tile: element (r, c) for e = tid + kThreads·t, r = e / Bc, c = e % Bc (a warp: one row r,
    // the 32 keys). Masked elements — past the causal diagonal, past Skv, rows past Sq — are 0.
#pragma unroll
    for (int t = 0; t < Tile::kPerThreadS; ++t) {
      const int e = tid + kThreads * t, r = e / Bc, c = e % Bc;
      const std::int64_t row = row0 + r;
      float p = 0.0f, ds = 0.0f;
      if (row < sh.sq && kv0 + c < causal_kv_end(row, sh.sq, sh.skv, kCausal)) {
        float s = 0.0f, dp = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; ++d) {
          s += to_f32(sQ[r * D + d]) * to_f32(sK[c * kLdKV + d]);
          dp += to_f32(sdO[r * D + d]) * to_f32(sV[c * kLdKV + d]);
        }
        p = expf(s * sh.scale - sLse[r]);  // a row that sees a key has a finite LSE
        ds = p * (dp - sDelta[r]);
      }
      sP[r * Bc + c] = p;
      sdS[r * Bc + c] = ds;
    }
    // (C) P_ij and dS_ij are complete before any thread reads a column of them.
    __syncthreads();
    //! [recompute]

    //! [dkdv]
    // dV_j += P_ijᵀ dO_i and dK_j += dS_ijᵀ Q_i (scaled at the end), in registers.
#pragma unroll
    for (int t = 0; t < Tile::kPerThreadKV; ++t) {
      const int e = tid + kThreads * t, c = e / D, d = e % D;
      float dv_sum = 0.0f, dk_sum = 0.0f;
#pragma unroll 8
      for (int r = 0; r < Br; ++r) {
        dv_sum += sP[r * Bc + c] * to_f32(sdO[r * D + d]);
        dk_sum += sdS[r * Bc + c] * to_f32(sQ[r * D + d]);
      }
      dv_acc[t] += dv_sum;
      dk_acc[t] += dk_sum;
    }
    //! [dkdv]

    //! [dq]
    // dQ_i += scale · dS_ij K_j: this block's share, added into the fp32 accumulator. Other blocks
    // (the other K/V tiles of the head) add theirs to the same elements at the same time: the
    // adds must be atomic.
#pragma unroll
    for (int t = 0; t < Tile::kPerThreadQ; ++t) {
      const int e = tid + kThreads * t, r = e / D, d = e % D;
      if (row0 + r >= sh.sq) continue;
      float acc = 0.0f;
#pragma unroll 8
      for (int c = 0; c < Bc; ++c)
        acc += sdS[r * Bc + c] * to_f32(sK[c * kLdKV + d]);
      atomicAdd(&dq_head[(row0 + r) * D + d], acc * sh.scale);
    }
    //! [dq]
  }

  // dK_j = scale · Σ_i dS_ijᵀ Q_i and dV_j = Σ_i P_ijᵀ dO_i, for the keys that exist (a key no
  // query row sees gets 0: the walk above was empty or its P, dS were 0).
#pragma unroll
  for (int t = 0; t < Tile::kPerThreadKV; ++t) {
    const int e = tid + kThreads * t, c = e / D, d = e % D;
    if (kv0 + c >= sh.skv) continue;
    const std::int64_t at = (bh * sh.skv + kv0 + c) * D + d;
    dk[at] = from_f32<T>(dk_acc[t] * sh.scale);
    dv[at] = from_f32<T>(dv_acc[t]);
  }
}

//! [convert_dq]
// dQ = the accumulator, rounded to the dtype, once every block has added its share.
template <class T>
__global__ void convert_dq_kernel(const float* __restrict__ dq_accum, T* __restrict__ dq,
                                  std::int64_t n) {
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += std::int64_t{gridDim.x} * blockDim.x)
    dq[idx] = from_f32<T>(dq_accum[idx]);
}
//! [convert_dq]

}  // namespace

std::int64_t workspace_bytes(const Shape& sh, std::int64_t head_dim) {
  return 4 * sh.bh * sh.sq * head_dim + 4 * sh.bh * sh.sq;
}

template <class T, int kD, bool kCausal>
void enqueue(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
  using Tile = BwdFusedTraits<T, kD>;
  float* dq_accum = static_cast<float*>(a.workspace);  // (B*H, Sq, D) fp32
  float* dsum = dq_accum + sh.bh * sh.sq * kD;         // (B*H, Sq) fp32: D
  const auto* q = static_cast<const T*>(a.q);
  const auto* k = static_cast<const T*>(a.k);
  const auto* v = static_cast<const T*>(a.v);
  const auto* o = static_cast<const T*>(a.o);
  const auto* dout = static_cast<const T*>(a.dout);
  const std::int64_t rows = sh.bh * sh.sq, tc = (sh.skv + Tile::Bc - 1) / Tile::Bc;
  //! [enqueue]
  FS_CUDA_CHECK(launch_kernel(dot_do_o_kernel<T>, grid_size(rows, kRowThreads, rows), kRowThreads,
                              0, stream, dout, o, dsum, dq_accum, rows, kD));
  FS_CUDA_CHECK(launch_kernel(fused_backward_kernel<T, Tile, kCausal>,
                              static_cast<unsigned>(sh.bh * tc), Tile::kThreads, Tile::kSmemBytes,
                              stream, q, k, v, dout, static_cast<const float*>(a.lse), dsum,
                              dq_accum, static_cast<T*>(a.dk), static_cast<T*>(a.dv), sh));
  FS_CUDA_CHECK(launch_kernel(convert_dq_kernel<T>,
                              grid_size(rows * kD, kRowThreads, std::int64_t{1} << 20), kRowThreads,
                              0, stream, dq_accum, static_cast<T*>(a.dq), rows * kD));
  //! [enqueue]
}

template <class T, int kD, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape&) {
  using Tile = BwdFusedTraits<T, kD>;
  const std::string tag =
      "<d" + std::to_string(kD) + "," + dtype_name<T>() + (kCausal ? ",causal>" : ">");
  return {
      {"dot_do_o" + tag, reinterpret_cast<const void*>(&dot_do_o_kernel<T>), kRowThreads, 0},
      {"fused_backward" + tag,
       reinterpret_cast<const void*>(&fused_backward_kernel<T, Tile, kCausal>), Tile::kThreads,
       Tile::kSmemBytes},
      {"convert_dq" + tag, reinterpret_cast<const void*>(&convert_dq_kernel<T>), kRowThreads, 0},
  };
}

#define FS_INSTANTIATE(T, D, C)                                                     \
  template void enqueue<T, D, C>(const Shape&, const AttentionArgs&, cudaStream_t); \
  template std::vector<KernelLaunchInfo> kernel_list<T, D, C>(const Shape&);
FS_INSTANTIATE(__half, 64, false)
FS_INSTANTIATE(__half, 64, true)
FS_INSTANTIATE(__half, 128, false)
FS_INSTANTIATE(__half, 128, true)
FS_INSTANTIATE(__nv_bfloat16, 64, false)
FS_INSTANTIATE(__nv_bfloat16, 64, true)
FS_INSTANTIATE(__nv_bfloat16, 128, false)
FS_INSTANTIATE(__nv_bfloat16, 128, true)
#undef FS_INSTANTIATE

}  // namespace flashsteps::bwd_fused
