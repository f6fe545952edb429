// =================================================================================================
// Stage 03 — online softmax: one fused kernel; S and P never leave the chip.
//
// What changed since stage 02: the three kernels become one. A block owns one query block Q_i (Br
// rows of one head), keeps Q_i and the output accumulator O_i in shared memory, streams the tiles
// K_j, V_j (Bc rows) past them, and replaces the global softmax by the online recurrence (book
// chapter "Attention"; host model in common/src/online_softmax_model.cpp): S_ij = Q_i K_jᵀ and
// O_i = alpha O_i + P_ij V_j on WMMA with fp32 accumulation, the running max m and sum l per row,
// exp2 with tau2 = scale · log2(e) folded once. Tiles entirely above the causal diagonal are not
// visited.
//
//! [prediction]
// Which metric should move, and by how much (written before measuring):
//  * DRAM bytes. Stage 02 moves ~12 bytes per score, ~200 MB per head at Sq = Skv = 4096. Here,
//    per head at Sq = Skv = 4096, D = 64 (fp16): between ~2 MB (every K/V re-read hits L2) and
//    ~68 MB (none does). DRAM bytes (read + write) fall by 3x at the very least and by ~100x if L2
//    does its job; we expect close to the latter.
//  * The bottleneck moves on chip: ~80 KB of shared-memory traffic per warp and 64-column tile at
//    D = 128 for ~0.5 MFLOP of tensor work, ~6.5 FLOP per byte, so the shared-memory pipe
//    (`l1tex__data_pipe_lsu_wavefronts_mem_shared.sum`) sets the pace. Barrier and long-scoreboard
//    stalls (four `__syncthreads()` per tile, unhidden K_j / V_j loads) at low occupancy: 93 KiB
//    per block at D = 128 leaves one block per SM on A100 and L4, two on H100. Bank conflicts:
//    none in the WMMA fragment accesses, 2-way in the element-wise softmax and O rescale.
//  * The tensor pipe (`sm__pipe_tensor_op_hmma_cycles_active`) well below 30% busy, and roughly
//    10-25% of the measured fp16 tensor peak.
//! [prediction]
//
// Limits: D = 64 and 128 only, fp16 and bf16, causal or not, any Sq, Skv >= 1; the dynamic shared
// memory must fit the device's opt-in limit (checked before launch); 16-byte aligned Q, K, V, O
// (checked at launch); B*H*Tr < 2^31 blocks. Not yet: no prefetch, no reordering of causal query
// blocks, no fast path for tiles that need no mask. The reasoning and the verdicts:
// book/chapters/stage_03_online_softmax.md.
// =================================================================================================
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::online_softmax {
namespace {

namespace wmma = nvcuda::wmma;

//! [load_tile]
// Copies rows [row0, row0 + kRows) of one head's (n_rows, D) matrix into a padded shared-memory
// tile, 16 bytes per thread and step; consecutive threads take consecutive 16-byte pieces of a
// row, so a warp reads whole rows (coalesced). Rows at or past n_rows — the ragged tail — are
// zero-filled and never read: no out-of-bounds access, and zeros rather than stale data, since a
// stale NaN in V would survive the multiplication by a masked p = 0.
template <class Tile, int kRows, class T>
__device__ __forceinline__ void load_tile(T* __restrict__ dst, int ld, const T* __restrict__ src,
                                          int row0, int n_rows) {
  constexpr int kPerRow = Tile::D / Tile::kVec;  // 16-byte pieces per row
  constexpr int kSteps = kRows * kPerRow / Tile::kThreads;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int idx = step * Tile::kThreads + static_cast<int>(threadIdx.x);
    const int r = idx / kPerRow, c = idx % kPerRow;
    uint4 piece = make_uint4(0u, 0u, 0u, 0u);
    if (row0 + r < n_rows) {
      piece = *reinterpret_cast<const uint4*>(src + (std::int64_t{row0} + r) * Tile::D +
                                              c * Tile::kVec);
    }
    *reinterpret_cast<uint4*>(dst + r * ld + c * Tile::kVec) = piece;
  }
}
//! [load_tile]

//! [ownership]
// Who owns what. Each of the 4 warps owns a 16-row strip of the query block for the whole kernel:
// the same rows of Q_i, S_ij, P_ij and O_i, and the running m, l of those rows. Only K_j and V_j
// are read by every warp, so only their buffer needs block-wide barriers.
//
//              columns of S_ij, P_ij: 0 .. Bc-1          columns of O_i: 0 .. D-1
//            +-----------------------------------+   +----------------------------------+
//    rows  0 | warp 0: 4 WMMA 16x16 tiles of S   |   | warp 0: D/16 WMMA 16x16 tiles    |
//      ..15  |         (16, Bc) fp32 + P strip   |   |         (16, D) fp32 strip of O  |
//         16 | warp 1                            |   | warp 1                           |
//         32 | warp 2                            |   | warp 2                           |
//      48..63| warp 3                            |   | warp 3                           |
//            +-----------------------------------+   +----------------------------------+
//
// Inside a strip, the element-wise work (softmax, rescaling O, the epilogue) gives row r of the
// strip (0..15) to the lane pair (2r, 2r+1): lane 2r takes the even columns, lane 2r+1 the odd
// ones, and one __shfl_xor(…, 1) combines their partial max and sum. The pair keeps m and l of
// its row in registers, equal in both lanes. WMMA's register layout is opaque (a lane cannot
// know which row an accumulator element belongs to), which is why S and O pass through shared
// memory where rows are addressable: the per-row alpha cannot be applied to a fragment.
//! [ownership]

template <class T, int kD, bool kCausal>
__global__ void __launch_bounds__(OnlineSoftmaxTraits<kD>::kThreads)
    fused_attention_kernel(const T* __restrict__ q, const T* __restrict__ k,
                           const T* __restrict__ v, T* __restrict__ o, float* __restrict__ lse,
                           Shape sh) {
  using Tile = OnlineSoftmaxTraits<kD>;
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc, kF = Tile::kFrag;
  constexpr int kLdQ = Tile::kLdQ, kLdKV = Tile::kLdKV, kLdS = Tile::kLdS, kLdP = Tile::kLdP,
                kLdO = Tile::kLdO;

  FS_DYNAMIC_SHARED(__align__(128) unsigned char, smem);
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);          // (Br, D) dtype: Q_i
  T* sKV = reinterpret_cast<T*>(smem + Tile::kOffKV);        // (Bc, D) dtype: K_j, then V_j
  float* sS = reinterpret_cast<float*>(smem + Tile::kOffS);  // (Br, Bc) fp32: raw S_ij
  T* sP = reinterpret_cast<T*>(smem + Tile::kOffP);          // (Br, Bc) dtype: P_ij
  float* sO = reinterpret_cast<float*>(smem + Tile::kOffO);  // (Br, D) fp32: unnormalised O_i

  // One block per (head, query block), query blocks of a head adjacent in launch order so that
  // they run together and share K_j, V_j through L2. A flat grid.x holds B*H*Tr < 2^31 blocks
  // (gridDim.y would cap B*H at 65535).
  const int i = static_cast<int>(blockIdx.x % static_cast<unsigned>(sh.tr));  // query block
  const std::int64_t bh = blockIdx.x / static_cast<unsigned>(sh.tr);          // b*H + h
  const int row0 = i * Br;                                                    // first row of Q_i
  const T* q_head = q + bh * sh.sq * D;   // (Sq, D) of this head
  const T* k_head = k + bh * sh.skv * D;  // (Skv, D)
  const T* v_head = v + bh * sh.skv * D;  // (Skv, D)

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warp_row0 = warp * Tile::kWarpRows;  // first row of this warp's strip in the tile
  const int r_tile = warp_row0 + lane / 2;       // the row this lane's pair owns, in the tile
  const int half = lane % 2;                     // even (0) or odd (1) columns of that row
  const int row = row0 + r_tile;  // its query row; >= Sq in a ragged last block: computed, not kept
  // Keys [0, kv_end) are visible to this row: the causal diagonal and Skv in one bound.
  const int kv_end = static_cast<int>(causal_kv_end(row, sh.sq, sh.skv, kCausal));

  //! [load_q]
  load_tile<Tile, Br>(sQ, kLdQ, q_head, row0, sh.sq);
  for (int e = static_cast<int>(threadIdx.x); e < Br * D; e += Tile::kThreads)
    sO[(e / D) * kLdO + e % D] = 0.0f;
  // The block's last row sees the most keys (the mask is monotone in the row): tiles past its last
  // visible key are masked for every row, and are skipped. Tc_i = 0 when no row sees a key.
  const int last_row = min(row0 + Br, sh.sq) - 1;
  const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, sh.skv, kCausal));
  const int Tc_i = (kv_stop + Bc - 1) / Bc;
  __syncthreads();  // Q_i and the zeroed O_i are complete before any warp reads them
  //! [load_q]

  float m = -INFINITY;  // running max of this row's raw scores (both lanes of the pair agree)
  float l = 0.0f;       // running sum of exp2(tau2 * (s - m)) over the keys seen so far

  for (int j = 0; j < Tc_i; ++j) {
    const int kv0 = j * Bc;  // first key of K_j, V_j

    //! [scores]
    load_tile<Tile, Bc>(sKV, kLdKV, k_head, kv0, sh.skv);
    __syncthreads();  // (A) K_j is complete before any warp multiplies with it

    // S_ij strip of this warp: (16, Bc) = Q_i strip (16, D) x K_j^T (D, Bc). K_j is stored
    // row-major (Bc, D), which read column-major is exactly K_j^T: no transpose is ever made.
    // The k loop is unrolled only by 2: fully unrolled, the compiler hoists all of its
    // D/16 * (1 + Bc/16) fragment loads ahead of the first mma (254 registers and spills for bf16
    // at D = 128); two steps keep the 4 independent accumulators busy within 128 registers.
    {
      wmma::fragment<wmma::accumulator, kF, kF, kF, float> s_frag[Bc / kF];  // (16, Bc) fp32
#pragma unroll
      for (int n = 0; n < Bc / kF; ++n)
        wmma::fill_fragment(s_frag[n], 0.0f);
#pragma unroll 2
      for (int kk = 0; kk < D / kF; ++kk) {
        wmma::fragment<wmma::matrix_a, kF, kF, kF, T, wmma::row_major> q_frag;  // (16, 16) of Q_i
        wmma::load_matrix_sync(q_frag, sQ + warp_row0 * kLdQ + kk * kF, kLdQ);
#pragma unroll
        for (int n = 0; n < Bc / kF; ++n) {
          wmma::fragment<wmma::matrix_b, kF, kF, kF, T, wmma::col_major> k_frag;  // (16, 16) K^T
          wmma::load_matrix_sync(k_frag, sKV + n * kF * kLdKV + kk * kF, kLdKV);
          wmma::mma_sync(s_frag[n], q_frag, k_frag, s_frag[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < Bc / kF; ++n) {
        wmma::store_matrix_sync(sS + warp_row0 * kLdS + n * kF, s_frag[n], kLdS,
                                wmma::mem_row_major);
      }
    }
    // (B) Every warp has finished reading K_j, so V_j may overwrite the buffer; and the S strip a
    // warp stored is visible to all of its lanes (the softmax reads it in a different layout).
    __syncthreads();
    //! [scores]

    //! [load_v]
    // Issued before the softmax, which does not touch this buffer: the loads are in flight while
    // the arithmetic below runs (as far as the compiler keeps that order; stage 04 makes it real).
    load_tile<Tile, Bc>(sKV, kLdKV, v_head, kv0, sh.skv);
    //! [load_v]

    //! [online_softmax]
    // This lane: row r_tile, columns half, half + 2, ... of S_ij. Masked columns (past the causal
    // diagonal, or past Skv in a ragged last tile) become -inf and contribute exp2(-inf) = 0.
    {
      const float* s_row = sS + r_tile * kLdS;  // (Bc) fp32 row of S_ij
      T* p_row = sP + r_tile * kLdP;            // (Bc) dtype row of P_ij
      float* o_row = sO + r_tile * kLdO;        // (D) fp32 row of O_i
      float s[Bc / 2];                          // this lane's half of the row, in registers
      float tile_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < Bc / 2; ++t) {
        const int c = 2 * t + half;
        s[t] = kv0 + c < kv_end ? s_row[c] : -INFINITY;
        tile_max = fmaxf(tile_max, s[t]);
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
      const float m_new = fmaxf(m, tile_max);
      // A row that has seen no visible key yet has m_new = -inf; subtracting a safe 0 instead
      // keeps exp2(-inf - -inf) = NaN out: alpha and every p are then exp2(-inf) = 0.
      const float m_scaled = (m_new == -INFINITY ? 0.0f : m_new) * sh.scale_log2;
      const float alpha = exp2f(m * sh.scale_log2 - m_scaled);  // 0 while m = -inf
      float row_sum = 0.0f;
#pragma unroll
      for (int t = 0; t < Bc / 2; ++t) {
        const float p = exp2f(fmaf(s[t], sh.scale_log2, -m_scaled));  // one FMA + one ex2
        row_sum += p;  // l sums the fp32 p; the product below uses p rounded to the dtype
        p_row[2 * t + half] = from_f32<T>(p);
      }
      row_sum += __shfl_xor_sync(kFullMask, row_sum, 1);  // a + b == b + a: the pair agrees
      l = alpha * l + row_sum;
      m = m_new;
#pragma unroll 8
      for (int d = half; d < D; d += 2)
        o_row[d] *= alpha;  // O_i = alpha O_i; P_ij V_j is added next
    }
    //! [online_softmax]
    // (C) V_j is complete; the P rows and the rescaled O rows that the lanes wrote are visible to
    // the warp's fragment loads below.
    __syncthreads();

    //! [pv]
    // O_i strip += P_ij strip (16, Bc) x V_j (Bc, D), one 16-column block of O at a time: the
    // accumulator starts from the rescaled O rows in shared memory and goes back there (O makes
    // one shared-memory round trip per tile). The P strip is loaded once, as Bc/16 fragments;
    // holding one O block instead of all D/16 keeps the register count off the 255 ceiling.
    {
      wmma::fragment<wmma::matrix_a, kF, kF, kF, T, wmma::row_major> p_frag[Bc / kF];  // (16, Bc)
#pragma unroll
      for (int kk = 0; kk < Bc / kF; ++kk)
        wmma::load_matrix_sync(p_frag[kk], sP + warp_row0 * kLdP + kk * kF, kLdP);
#pragma unroll
      for (int n = 0; n < D / kF; ++n) {
        wmma::fragment<wmma::accumulator, kF, kF, kF, float> o_frag;  // (16, 16) fp32 of O_i
        float* o_block = sO + warp_row0 * kLdO + n * kF;
        wmma::load_matrix_sync(o_frag, o_block, kLdO, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < Bc / kF; ++kk) {
          wmma::fragment<wmma::matrix_b, kF, kF, kF, T, wmma::row_major> v_frag;  // (16, 16) of V
          wmma::load_matrix_sync(v_frag, sKV + kk * kF * kLdKV + n * kF, kLdKV);
          wmma::mma_sync(o_frag, p_frag[kk], v_frag, o_frag);
        }
        wmma::store_matrix_sync(o_block, o_frag, kLdO, wmma::mem_row_major);
      }
    }
    // (D) Every warp has finished reading V_j before K_{j+1} overwrites the buffer; after the last
    // tile, the O strips stored above are visible to the epilogue's lanes.
    __syncthreads();
    //! [pv]
  }

  //! [epilogue]
  // O = O_i / l and LSE = tau * m + ln(l) = ln(2) * (tau2 * m + log2(l)): m is a raw score, so
  // tau2 * m = log2(e) * tau * m, and the whole sum in base 2 times ln(2) is the natural log the
  // contract asks for. A row that saw no key has l = 0: O = 0, LSE = -inf (never 0/0).
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  if (half == 0 && row < sh.sq) {
    lse[bh * sh.sq + row] = l > 0.0f ? kLn2 * fmaf(m, sh.scale_log2, log2f(l)) : -INFINITY;
  }
  // The warp writes its own 16 rows of O, 16 bytes per lane and step, a whole row per D/8 lanes
  // (coalesced). Row r's 1/l lives in lane 2r; all lanes run every step, so the shuffle is safe.
  constexpr int kPerRow = D / Tile::kVec;  // 16-byte pieces per row of O
#pragma unroll
  for (int step = 0; step < Tile::kWarpRows * kPerRow / 32; ++step) {
    const int idx = step * 32 + lane;
    const int r = idx / kPerRow, c = idx % kPerRow;  // strip row, piece of the row
    const float row_inv_l = __shfl_sync(kFullMask, inv_l, 2 * r);
    const float4* src =
        reinterpret_cast<const float4*>(sO + (warp_row0 + r) * kLdO + c * Tile::kVec);
    const float4 a = src[0], b = src[1];  // (8) fp32 of O_i
    const uint4 piece = make_uint4(
        pack2<T>(a.x * row_inv_l, a.y * row_inv_l), pack2<T>(a.z * row_inv_l, a.w * row_inv_l),
        pack2<T>(b.x * row_inv_l, b.y * row_inv_l), pack2<T>(b.z * row_inv_l, b.w * row_inv_l));
    const int out_row = row0 + warp_row0 + r;
    if (out_row < sh.sq)  // ragged last block: rows past Sq were computed, never stored
      *reinterpret_cast<uint4*>(o + (bh * sh.sq + out_row) * D + c * Tile::kVec) = piece;
  }
  //! [epilogue]
}

}  // namespace

FS_DEFINE_KERNEL_OF(fused_attention_kernel<T, Tile::D, kCausal>)
FS_EXPORT_KERNELS(OnlineSoftmaxTraits<64>)
FS_EXPORT_KERNELS(OnlineSoftmaxTraits<128>)

}  // namespace flashsteps::online_softmax
