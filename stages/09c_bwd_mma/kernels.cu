// =================================================================================================
// Stage 09c — the backward on tensor cores: stage 09b's fused backward (FlashAttention-2's
// Algorithm 2) with its five products on mma.sync m16n8k16, fp32 accumulation, ldmatrix loads.
//
// What changed since stage 09b:
//  * Each of the 4 warps owns 16 keys of K_j (Bc = 64; Br = 64 at D = 64, 32 at D = 128). It
//    computes its strip of the tile transposed, Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ (16 keys x Br
//    queries), so that the accumulators of Pᵀ and dSᵀ are, register for register, the A operand
//    of dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i: 06c's "the S accumulator is the P·V A fragment"
//    applied twice. Neither P nor dS is written out for those two products.
//  * Which operand is transposed where (the lesson; the table at `operands` below): K_j, V_j (A)
//    and Q_i, dO_i (B of Sᵀ, dPᵀ) are read as stored, by ldmatrix without .trans; Q_i and dO_i as
//    B of dK, dV are (k = query, n = d) row-major and need ldmatrix.trans; dQ_i += dS K_j wants dS
//    with queries as rows, the transpose of what the warps hold: each warp stores its dSᵀ strip
//    (rounded to the dtype) into shared memory, and after a barrier every warp reads dS back with
//    ldmatrix.trans, and K_j (k = key, n = d) with .trans too. The one round trip is dS's.
//  * Rows of K_j, V_j, Q_i, dO_i and dSᵀ are padded by 16 bytes (ldmatrix needs 16-byte rows and
//    conflict-free phases); the dK_j, dV_j strips stay in registers as mma accumulators; 64 keys
//    per block (not 32); the kernel opts into 56.25 KiB of shared memory at D = 128.
// Unchanged: D by the first kernel, P recomputed from the LSE (expf, as 09b), masking element by
// element, the causal walk, dQ by fp32 atomicAdd into the workspace and its conversion.
//
//! [prediction]
// Which metric should move (written before measuring, before any GPU run). Per (i, j) tile pair
// the block makes 5·Bc·Br·D MACs on mma.sync — 5·(Bc/16)·(Br/8)·(D/16) = 640 m16n8k16
// instructions at either head dim — against 09b's scalar FMAs; the ldmatrix traffic is about one
// x4 per two mma. It still copies Q_i, dO_i element by element with no copy in flight during the
// math (09b's load_rows), meets three block-wide barriers per tile, and issues Br·D fp32 atomics
// per tile pair. Figures it rests on: an A100's dense fp16 tensor rate, 312 TFLOPS, and an H100
// SXM's, 989 TFLOPS (NVIDIA's datasheets); mma.sync reaches well under the H100 figure (that
// needs wgmma: stage 07a), about 1.5x its A100 rate per SM-cycle (06c's header); 09b's own
// prediction, 0.5% to 5% of the fp16 peak. So:
//  * 8% to 30% of the measured fp16 tensor peak at S = 2048, D = 64 and 128, causal or not: the
//    tensor cores idle while a tile is copied and at the barriers (no overlap yet), and the
//    atomics and the element-wise copies take a fixed share per tile pair;
//  * 5 to 40 times faster than 09b at the same shape (its 0.5-5% against the above);
//  * against SDPA's flash backward (FlashAttention-2, measured in the same run) 0.3x to 0.8x at
//    D = 128, S = 2048 — short of the issue's target (level with it), which needs what FA2's
//    kernel has and this step does not: cp.async copies of the next Q_i, dO_i during the math,
//    and no element-wise loads;
//  * registers: 128 (D = 64) and 160 (D = 128) accumulators per thread (kernels.cuh), no spill.
//! [prediction]
//
// Limits: D = 64 and 128, fp16 and bf16, causal or not, any Sq, Skv >= 1, sm_80+ (mma.sync with
// bf16, ldmatrix); B·H·⌈Skv/64⌉ < 2^31 blocks; the fp32 accumulator and D (4·B·H·Sq·(D+1) bytes)
// must fit in device memory. dQ is not bitwise reproducible on a GPU (09b's reason: the atomics'
// order); dK and dV are. Rows that see no key get dQ = 0, keys no row sees dK = dV = 0. The
// chapter: book/chapters/stage_09c_bwd_mma.md.
// =================================================================================================
#include <cfloat>
#include <cmath>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::bwd_mma {
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

//! [operands]
// Which operand is transposed where. mma.sync.m16n8k16.row.col computes C (16 x 8) += A (16 x 16)
// B (16 x 8): A with its 16 rows as m (k contiguous in a register pair), B with its 8 columns as n
// (k contiguous). ldmatrix without .trans hands a lane two neighbours of a stored row; with .trans
// two neighbours of a stored column. So an operand whose k runs along its stored rows is read as
// stored, and one whose k runs down its stored columns is read with .trans:
//
//   product (per warp)          A (m x k)               B (k x n)               k
//   Sᵀ   = K_j  Q_iᵀ            K_j rows, as stored      Q_i rows, as stored      d
//   dPᵀ  = V_j  dO_iᵀ           V_j rows, as stored      dO_i rows, as stored     d
//   dV_j += Pᵀ  dO_i            Pᵀ: the Sᵀ accumulator   dO_i, .trans             query
//   dK_j += dSᵀ Q_i             dSᵀ: the dPᵀ accumul.    Q_i, .trans              query
//   dQ_i += dS  K_j             dS: sdSᵀ, .trans         K_j, .trans              key
//
// m is the warp's 16 keys in the first four rows and 16 query rows of Q_i in the last. Computing
// Sᵀ instead of S (as the forward and 09b do) is what puts Pᵀ and dSᵀ in the registers that the
// next product takes as A: a C fragment's rows g, g+8 and columns 2t, 2t+1 of two adjacent n8
// tiles are exactly the a0..a3 of one k16 step (06c's p_in_registers picture). dQ needs dS with
// queries as m, which no warp holds (each has 16 keys of every query): dSᵀ goes to shared memory,
// where ldmatrix.trans reads it back as dS.
//! [operands]

//! [lanes]
// Per-lane ldmatrix element offsets in a tile with row stride ld, for one x4 (two n8 tiles or one
// A fragment), before the k16 / n16 step terms:
//  * A, as stored (K_j, V_j strips): matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7,
//    k 8-15), (rows 8-15, k 8-15) -> a0..a3: lane l points at row l % 16, column 8 (l / 16).
//  * B, as stored (Q_i, dO_i rows = n): (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
//    (n 8-15, k 8-15) -> b0, b1 of n8 tile 0 and of tile 1: row l % 8 + 8 (l / 16), column
//    8 ((l / 8) % 2). The same offsets, with .trans, give dQ's A from sdSᵀ (rows = keys = k):
//    matrix (keys 0-7, queries 0-7) transposed is a0, (keys 0-7, queries 8-15) a1, and so on.
//  * B, .trans (Q_i, dO_i, K_j rows = k): (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
//    (k 8-15, n 8-15) -> b0, b1 of n8 tile 0 and of tile 1: row l % 16, column 8 (l / 16) — the
//    A pattern.
__device__ __forceinline__ int lane_a(int lane, int ld) {
  return (lane % 16) * ld + 8 * (lane / 16);
}
__device__ __forceinline__ int lane_b(int lane, int ld) {
  return (lane % 8 + 8 * (lane / 16)) * ld + 8 * ((lane / 8) % 2);
}
//! [lanes]

//! [a_fragment]
// The A fragment of k-step kk (columns 16kk .. 16kk + 15) of a (16, 8·kN) fp32 accumulator strip,
// rounded to the dtype: the accumulators of n8 tiles 2kk and 2kk + 1 hold exactly a0..a3 (06c's
// p_in_registers picture), so no data crosses lanes. kk must be a constant (an unrolled loop).
template <class T, int kN>
__device__ __forceinline__ void a_fragment(std::uint32_t (&a)[4], const float (&acc)[kN][4],
                                           int kk) {
  a[0] = pack2<T>(acc[2 * kk][0], acc[2 * kk][1]);
  a[1] = pack2<T>(acc[2 * kk][2], acc[2 * kk][3]);
  a[2] = pack2<T>(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
  a[3] = pack2<T>(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}
//! [a_fragment]

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads)
    fused_backward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const T* __restrict__ dout, const float* __restrict__ lse,
                          const float* __restrict__ dsum, float* __restrict__ dq_accum,
                          T* __restrict__ dk, T* __restrict__ dv, Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc, kThreads = Tile::kThreads;
  constexpr int kLd = Tile::kLd, kLdDs = Tile::kLdDs;
  constexpr int kDK = Tile::kDK, kQN = Tile::kQN, kQK = Tile::kQK, kDN = Tile::kDN;

  FS_DYNAMIC_SHARED(__align__(16) unsigned char, smem);
  T* sK = reinterpret_cast<T*>(smem + Tile::kOffK);                  // (Bc, D) dtype: K_j
  T* sV = reinterpret_cast<T*>(smem + Tile::kOffV);                  // (Bc, D) dtype: V_j
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);                  // (Br, D) dtype: Q_i
  T* sdO = reinterpret_cast<T*>(smem + Tile::kOffDO);                // (Br, D) dtype: dO_i
  T* sdSt = reinterpret_cast<T*>(smem + Tile::kOffDS);               // (Bc, Br) dtype: dSᵀ_ij
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
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;     // groupID, threadID_in_group (ptx.cuh's picture)
  const int key0 = warp * Tile::kWarpKeys;  // this warp's first key in K_j
  // This lane's keys in the warp's accumulators: rows g and g + 8 of every (16, 8) tile.
  const std::int64_t my_key[2] = {kv0 + key0 + g, kv0 + key0 + g + 8};

  //! [load_kv]
  // K_j and V_j stay in shared memory for the whole walk.
  load_rows<Bc, D, kThreads>(sK, kLd, k + bh * sh.skv * D, kv0, sh.skv);
  load_rows<Bc, D, kThreads>(sV, kLd, v + bh * sh.skv * D, kv0, sh.skv);
  //! [load_kv]

  // The warp's strips of dK_j and dV_j, (16 keys, D) fp32 as D/8 accumulator tiles (16, 8):
  // element e of tile n is key my_key[e / 2], column 8n + 2t + e % 2.
  float dk_acc[kDN][4] = {};  // dK_j / scale
  float dv_acc[kDN][4] = {};  // dV_j

  const std::uint32_t sK_a = ptx::smem_addr(sK + key0 * kLd + lane_a(lane, kLd));
  const std::uint32_t sV_a = ptx::smem_addr(sV + key0 * kLd + lane_a(lane, kLd));
  const std::uint32_t sQ_b = ptx::smem_addr(sQ + lane_b(lane, kLd));
  const std::uint32_t sdO_b = ptx::smem_addr(sdO + lane_b(lane, kLd));
  const std::uint32_t sQ_bt = ptx::smem_addr(sQ + lane_a(lane, kLd));
  const std::uint32_t sdO_bt = ptx::smem_addr(sdO + lane_a(lane, kLd));
  constexpr std::uint32_t kRow = kLd * sizeof(T);  // bytes per row of K_j, V_j, Q_i, dO_i

  const int tr = static_cast<int>((sh.sq + Br - 1) / Br);
  //! [walk]
  for (int i = first_query_tile<Br, kCausal>(kv0, sh); i < tr; ++i) {
    const std::int64_t row0 = std::int64_t{i} * Br;  // first row of Q_i
    // (A) Every thread is done with the last tile's Q_i, dO_i and dSᵀ_ij (and, at the first
    // tile, has stored its K_j, V_j rows) before they are overwritten or read.
    __syncthreads();
    load_rows<Br, D, kThreads>(sQ, kLd, q_head, row0, sh.sq);
    load_rows<Br, D, kThreads>(sdO, kLd, do_head, row0, sh.sq);
    for (int r = tid; r < Br; r += kThreads) {
      sLse[r] = row0 + r < sh.sq ? lse_head[row0 + r] : 0.0f;
      sDelta[r] = row0 + r < sh.sq ? dsum_head[row0 + r] : 0.0f;
    }
    __syncthreads();  // (B) Q_i, dO_i, LSE_i, D_i are in shared memory
                      //! [walk]

    //! [scores]
    // The warp's strips (16 keys, Br queries) of Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: element e of
    // tile n is key my_key[e / 2], query row0 + 8n + 2t + e % 2.
    float s_acc[kQN][4] = {};   // (16, Br) fp32: Sᵀ, then Pᵀ
    float dp_acc[kQN][4] = {};  // (16, Br) fp32: dPᵀ, then dSᵀ
#pragma unroll 1
    for (int kk = 0; kk < kDK; ++kk) {  // k = d, 16 at a time
      std::uint32_t ka[4], va[4];       // (16 keys, 16 d) of K_j, V_j: A fragments
      ptx::ldmatrix_x4(ka, sK_a + 32u * kk);
      ptx::ldmatrix_x4(va, sV_a + 32u * kk);
#pragma unroll
      for (int np = 0; np < kQN / 2; ++np) {
        std::uint32_t qb[4], ob[4];  // (16 queries, 16 d) of Q_i, dO_i: B of tiles 2np, 2np+1
        ptx::ldmatrix_x4(qb, sQ_b + 16u * np * kRow + 32u * kk);
        ptx::ldmatrix_x4(ob, sdO_b + 16u * np * kRow + 32u * kk);
        ptx::mma_m16n8k16<T>(s_acc[2 * np], ka, {qb[0], qb[1]});
        ptx::mma_m16n8k16<T>(s_acc[2 * np + 1], ka, {qb[2], qb[3]});
        ptx::mma_m16n8k16<T>(dp_acc[2 * np], va, {ob[0], ob[1]});
        ptx::mma_m16n8k16<T>(dp_acc[2 * np + 1], va, {ob[2], ob[3]});
      }
    }
    //! [scores]

    //! [recompute]
    // Pᵀ = exp(Sᵀ − LSE) and dSᵀ = Pᵀ ∘ (dPᵀ − D), in place, LSE and D indexed by the column
    // (the query). Masked elements — past the causal diagonal, past Skv, rows past Sq — are 0,
    // exactly as 09b.
#pragma unroll
    for (int n = 0; n < kQN; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 8 * n + 2 * t + e % 2;  // query of the tile
        const std::int64_t row = row0 + r;
        float p = 0.0f, ds = 0.0f;
        if (row < sh.sq && my_key[e / 2] < causal_kv_end(row, sh.sq, sh.skv, kCausal)) {
          p = expf(s_acc[n][e] * sh.scale - sLse[r]);  // a row that sees a key has a finite LSE
          ds = p * (dp_acc[n][e] - sDelta[r]);
        }
        s_acc[n][e] = p;
        dp_acc[n][e] = ds;
      }
    }
    //! [recompute]

    //! [dkdv]
    // dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i (scaled at the end): A straight from the accumulators,
    // rounded to the dtype (as the same-precision reference rounds P and dS), B by ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kQK; ++kk) {  // k = query, 16 at a time: tiles 2kk, 2kk + 1
      std::uint32_t pa[4], dsa[4];      // (16 keys, 16 queries) of Pᵀ and dSᵀ: A fragments
      a_fragment<T>(pa, s_acc, kk);
      a_fragment<T>(dsa, dp_acc, kk);
      // The warp's dSᵀ strip, as the dtype, for dQ: rows key0 + g (+ 8), 4-byte pairs of queries.
      T* ds_row = sdSt + (key0 + g) * kLdDs + 16 * kk + 2 * t;
      *reinterpret_cast<std::uint32_t*>(ds_row) = dsa[0];
      *reinterpret_cast<std::uint32_t*>(ds_row + 8 * kLdDs) = dsa[1];
      *reinterpret_cast<std::uint32_t*>(ds_row + 8) = dsa[2];
      *reinterpret_cast<std::uint32_t*>(ds_row + 8 * kLdDs + 8) = dsa[3];
#pragma unroll
      for (int dp = 0; dp < kDN / 2; ++dp) {
        std::uint32_t ob[4], qb[4];  // (16 queries, 16 d) of dO_i, Q_i: B of tiles 2dp, 2dp+1
        ptx::ldmatrix_x4_trans(ob, sdO_bt + 16u * kk * kRow + 32u * dp);
        ptx::ldmatrix_x4_trans(qb, sQ_bt + 16u * kk * kRow + 32u * dp);
        ptx::mma_m16n8k16<T>(dv_acc[2 * dp], pa, {ob[0], ob[1]});
        ptx::mma_m16n8k16<T>(dv_acc[2 * dp + 1], pa, {ob[2], ob[3]});
        ptx::mma_m16n8k16<T>(dk_acc[2 * dp], dsa, {qb[0], qb[1]});
        ptx::mma_m16n8k16<T>(dk_acc[2 * dp + 1], dsa, {qb[2], qb[3]});
      }
    }
    // (C) Every warp's dSᵀ strip is in shared memory before any warp reads dS across the strips.
    __syncthreads();
    //! [dkdv]

    //! [dq]
    // dQ_i += scale · dS_ij K_j: this block's share, added into the fp32 accumulator. The warp's
    // piece: query rows qr0 .. qr0 + 15, columns dc0 .. dc0 + kDqCols - 1. Other blocks (the other
    // K/V tiles of the head) add theirs to the same elements at the same time: the adds must be
    // atomic.
    {
      const int qr0 = 16 * (warp % Tile::kDqRows), dc0 = Tile::kDqCols * (warp / Tile::kDqRows);
      float dq_acc[Tile::kDqN][4] = {};  // (16, kDqCols) fp32
#pragma unroll 1
      for (int kc = 0; kc < Tile::kCK; ++kc) {  // k = key, 16 at a time
        std::uint32_t dsa[4];  // (16 queries, 16 keys) of dS: A, read from dSᵀ with .trans
        const T* ds_lane = sdSt + 16 * kc * kLdDs + qr0 + lane_b(lane, kLdDs);  // keys = k: rows
        ptx::ldmatrix_x4_trans(dsa, ptx::smem_addr(ds_lane));
#pragma unroll
        for (int dp = 0; dp < Tile::kDqN / 2; ++dp) {
          std::uint32_t kb[4];  // (16 keys, 16 d) of K_j: B of tiles 2dp, 2dp+1
          ptx::ldmatrix_x4_trans(
              kb, ptx::smem_addr(sK + 16 * kc * kLd + dc0 + 16 * dp + lane_a(lane, kLd)));
          ptx::mma_m16n8k16<T>(dq_acc[2 * dp], dsa, {kb[0], kb[1]});
          ptx::mma_m16n8k16<T>(dq_acc[2 * dp + 1], dsa, {kb[2], kb[3]});
        }
      }
#pragma unroll
      for (int n = 0; n < Tile::kDqN; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t row = row0 + qr0 + g + 8 * (e / 2);
          if (row >= sh.sq) continue;
          const int d = dc0 + 8 * n + 2 * t + e % 2;
          atomicAdd(&dq_head[row * D + d], dq_acc[n][e] * sh.scale);
        }
      }
    }
    //! [dq]
  }

  // dK_j = scale · Σ_i dS_ijᵀ Q_i and dV_j = Σ_i P_ijᵀ dO_i, for the keys that exist (a key no
  // query row sees gets 0: the walk above was empty or its P, dS were 0).
#pragma unroll
  for (int n = 0; n < kDN; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (my_key[e / 2] >= sh.skv) continue;
      const std::int64_t at = (bh * sh.skv + my_key[e / 2]) * D + 8 * n + 2 * t + e % 2;
      dk[at] = from_f32<T>(dk_acc[n][e] * sh.scale);
      dv[at] = from_f32<T>(dv_acc[n][e]);
    }
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

//! [configure]
// The fused kernel uses up to 56.25 KiB of dynamic shared memory (kernels.cuh): above 48 KiB a
// kernel must opt in, per function (09b's 22 KiB did not need to).
template <class T, int kD>
void allow_smem() {
  using Tile = BwdMmaTraits<T, kD>;
  FS_CUDA_CHECK(allow_dynamic_smem(fused_backward_kernel<T, Tile, false>, Tile::kSmemBytes));
  FS_CUDA_CHECK(allow_dynamic_smem(fused_backward_kernel<T, Tile, true>, Tile::kSmemBytes));
}

void configure_kernels() {
  allow_smem<__half, 64>();
  allow_smem<__half, 128>();
  allow_smem<__nv_bfloat16, 64>();
  allow_smem<__nv_bfloat16, 128>();
}
//! [configure]

template <class T, int kD, bool kCausal>
void enqueue(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
  using Tile = BwdMmaTraits<T, kD>;
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
  using Tile = BwdMmaTraits<T, kD>;
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

}  // namespace flashsteps::bwd_mma
