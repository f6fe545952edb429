// =================================================================================================
// Stage 04 — cp.async: the next K/V tile is in flight while this one is computed.
//
// What changed since stage 03:
//  * K_j and V_j are copied with cp.async (cuda::memcpy_async on a thread-scope cuda::pipeline):
//    global to shared memory without passing through registers, so the issuing warp does not wait.
//  * They land in a ring of kStages shared-memory stages, each with its own K and V buffer; right
//    after the barrier that opens tile j, the block issues the copies of tile j + kStages - 1 into
//    the stage tile j - 1 has just left. Q_i is copied the same way, once.
//  * One block-wide barrier per tile instead of four (the others become __syncwarp()).
//  * The ring costs shared memory (kernels.cuh has the table): 88 KiB at D = 64, 144 KiB at
//    D = 128 (sm_80, sm_90); sm_86/sm_89 (99 KiB) run D = 128 with Bc = 32 (98 KiB) instead.
// Everything else — the online softmax, the two products, the epilogue — is stage 03's code.
//
//! [prediction]
// Which metric should move, and by how much (written before measuring). A model per block and
// 64-key tile, in SM cycles, D = 64 / D = 128; each number an estimate the measurement can refute:
//    t_C  the block's math on one tile, paced by shared memory: ~2,000 / ~3,100 (~4,800 at
//         D = 128, Bc = 32).
//    t_L  K_j and V_j from L2: ~860 / ~1,100 (~600 to the first byte, then ~64 B/clk per SM).
//    Stage 03 stalls ~1,150 / ~1,400 cycles per tile, f_03 = 0.37 / 0.31 of the block's time; here
//    t_L < t_C hides the copy whole with two stages; what is left is the one barrier: f_04 ~ 0.1.
//  * `smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active` falls by 3x or more;
//    `..._stalled_barrier_...` falls by ~2x (one barrier per tile instead of four, but it absorbs
//    the skew between warps).
//  * Latency at S >= 1024, time per tile on an SM t_C / (1 - f^N), N resident blocks per SM:
//        GPU (smem/SM)     D     N 03 -> 04   03: t_C/(1-f^N)   04: t_C/(1-f^N)   04 vs 03
//        L4   (100 KiB)    64    1 -> 1       2,000 / 0.63      2,000 / 0.9       1.4x faster
//        A100 (164 KiB)    64    2 -> 1       2,000 / 0.86      2,000 / 0.9       ~1.05x
//        H100 (228 KiB)    64    3 -> 2       2,000 / 0.95      2,000 / 0.99      ~1.05x
//        L4                128   1 -> 1       3,100 / 0.69      4,800 / 0.9       ~0.85x (Bc = 32)
//        A100              128   1 -> 1       3,100 / 0.69      3,100 / 0.9       1.3x faster
//        H100              128   2 -> 1       3,100 / 0.90      3,100 / 0.9       ~1.0x
//    The tensor pipe (`sm__pipe_tensor_op_hmma_cycles_active`) moves by the same factor as latency;
//    achieved occupancy (`sm__warps_active`) halves where N halves. Causal: slightly smaller gain.
//    If H100 gains much more than 10%, stage 03's blocks did not hide each other's loads as
//    independently as assumed.
//! [prediction]
//
// Limits: D = 64 and 128 only, fp16 and bf16, causal or not, any Sq, Skv >= 1; shared memory within
// the device's opt-in limit (checked before launch; the launcher picks the D = 128 tile by it);
// Q, K, V, O 16-byte aligned (checked at launch); B*H*Tr < 2^31 blocks. Not yet: the same warps
// copy and compute in step at a block-wide barrier (stage 05); O and P still make a shared-memory
// round trip per tile (stage 06b). The reasoning and the verdicts:
// book/chapters/stage_04_cp_async.md.
// =================================================================================================
#include <mma.h>
#include <cuda/pipeline>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::cp_async {
namespace {

namespace wmma = nvcuda::wmma;

// The per-thread pipeline of cp.async copies. cp.async completion is tracked per thread, in
// "commit groups": a thread closes a group (producer_commit, cp.async.commit_group) and later waits
// until at most N of its newest groups are still in flight (pipeline_consumer_wait_prior<N>,
// cp.async.wait_group N). That is exactly cuda::pipeline at thread scope, and it needs no shared
// state. A block-scope cuda::pipeline would also make each stage's copies visible block-wide and
// guard its refill, through a pair of shared-memory barriers per stage; here one __syncthreads()
// per tile does both jobs at once, and explicit full/empty barriers are stage 05's subject.
using Pipeline = cuda::pipeline<cuda::thread_scope_thread>;

//! [load_tile_async]
// Issues the copy of rows [row0, row0 + kRows) of one head's (n_rows, D) matrix into a padded
// shared-memory tile and returns without waiting: one cp.async (cp.async.cg: 16 bytes, through L2,
// past L1 and the register file) per thread and step, consecutive threads on consecutive 16-byte
// pieces of a row (coalesced, as in stage 03). The copies join this thread's open commit group.
// Rows at or past n_rows — the ragged tail — are never read: the thread stores zeros there with an
// ordinary shared-memory store instead (a stale NaN in V would survive the multiplication by a
// masked p = 0). Both kinds of write become visible to the other warps at the same barrier.
template <class Tile, int kRows, class T>
__device__ __forceinline__ void load_tile_async(T* __restrict__ dst, int ld,
                                                const T* __restrict__ src, int row0, int n_rows,
                                                Pipeline& pipe) {
  constexpr int kPerRow = Tile::D / Tile::kVec;  // 16-byte pieces per row
  constexpr int kSteps = kRows * kPerRow / Tile::kThreads;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int idx = step * Tile::kThreads + static_cast<int>(threadIdx.x);
    const int r = idx / kPerRow, c = idx % kPerRow;
    T* piece = dst + r * ld + c * Tile::kVec;  // (8) dtype in smem
    if (row0 + r < n_rows) {
      cuda::memcpy_async(piece, src + (std::int64_t{row0} + r) * Tile::D + c * Tile::kVec,
                         cuda::aligned_size_t<16>(16), pipe);
    } else {
      *reinterpret_cast<uint4*>(piece) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}
//! [load_tile_async]

//! [ownership]
// Who owns what (unchanged since stage 03). Each of the 4 warps owns a 16-row strip of the query
// block for the whole kernel: the same rows of Q_i, S_ij, P_ij and O_i, and the running m, l of
// those rows. Only K_j and V_j — the ring — are read by every warp, so only the ring needs
// block-wide barriers; a warp's own strips need __syncwarp() only.
//
//              columns of S_ij, P_ij: 0 .. Bc-1          columns of O_i: 0 .. D-1
//            +-----------------------------------+   +----------------------------------+
//    rows  0 | warp 0: Bc/16 WMMA 16x16 tiles    |   | warp 0: D/16 WMMA 16x16 tiles    |
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

//! [ring]
// The ring, kStages = 2 (tile j in stage j % 2). Time runs down; "copy" is cp.async in flight,
// "math" is both products and the softmax on the stage named.
//
//              stage 0            stage 1
//   prologue   copy Q_i,K_0,V_0   -
//   tile 0     math (K_0, V_0)    copy K_1, V_1        <- issued right after barrier (A) of tile 0
//   tile 1     copy K_2, V_2      math (K_1, V_1)      <- stage 0 is free: (A) of tile 1 saw every
//   tile 2     math (K_2, V_2)    copy K_3, V_3           warp finish tile 0
//
// With kStages stages the prologue copies tiles 0 .. kStages-2 and tile j refills stage
// (j - 1) % kStages with tile j + kStages - 1: kStages - 1 tiles are in flight during tile j's
// math.
//! [ring]

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads)
    fused_attention_kernel(const T* __restrict__ q, const T* __restrict__ k,
                           const T* __restrict__ v, T* __restrict__ o, float* __restrict__ lse,
                           Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc, kF = Tile::kFrag;
  constexpr int kStages = Tile::Stages;
  constexpr int kLdQ = Tile::kLdQ, kLdKV = Tile::kLdKV, kLdS = Tile::kLdS, kLdP = Tile::kLdP,
                kLdO = Tile::kLdO;

  FS_DYNAMIC_SHARED(__align__(128) unsigned char, smem);
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);          // (Br, D) dtype: Q_i
  float* sS = reinterpret_cast<float*>(smem + Tile::kOffS);  // (Br, Bc) fp32: raw S_ij
  T* sP = reinterpret_cast<T*>(smem + Tile::kOffP);          // (Br, Bc) dtype: P_ij
  float* sO = reinterpret_cast<float*>(smem + Tile::kOffO);  // (Br, D) fp32: unnormalised O_i
  // Stage s of the ring: K (Bc, D) dtype, then V (Bc, D) dtype.
  auto stage_k = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffRing + s * Tile::kStageBytes);
  };
  auto stage_v = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffRing + s * Tile::kStageBytes + Tile::kKVBytes);
  };

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

  // The block's last row sees the most keys (the mask is monotone in the row): tiles past its last
  // visible key are masked for every row, and are skipped. Tc_i = 0 when no row sees a key.
  const int last_row = min(row0 + Br, sh.sq) - 1;
  const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, sh.skv, kCausal));
  const int Tc_i = (kv_stop + Bc - 1) / Bc;

  //! [pipeline]
  Pipeline pipe = cuda::make_pipeline();
  // Issues this thread's copies of K_t and V_t into stage t % kStages and closes its commit group.
  // Past the last tile the group is empty but still committed, so that group t always holds tile t
  // and "wait for tile j" is the same count at every j.
  auto prefetch = [&](int t) {
    if (t < Tc_i) {
      const int s = t % kStages;
      load_tile_async<Tile, Bc>(stage_k(s), kLdKV, k_head, t * Bc, sh.skv, pipe);  // K_t (Bc, D)
      load_tile_async<Tile, Bc>(stage_v(s), kLdKV, v_head, t * Bc, sh.skv, pipe);  // V_t (Bc, D)
    }
    pipe.producer_commit();  // cp.async.commit_group
  };
  //! [pipeline]

  //! [prologue]
  // Group 0 carries Q_i with tile 0; groups 1 .. kStages-2 carry tiles 1 .. kStages-2.
  load_tile_async<Tile, Br>(sQ, kLdQ, q_head, row0, sh.sq, pipe);  // Q_i (Br, D)
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t)
    prefetch(t);
  // While those copies fly, each warp zeroes its own O strip (16, D) fp32: only its own lanes
  // read it, so barrier (A) of tile 0 — or the __syncwarp() before the epilogue — publishes it.
  for (int e = lane; e < Tile::kWarpRows * D; e += 32)
    sO[(warp_row0 + e / D) * kLdO + e % D] = 0.0f;
  //! [prologue]

  float m = -INFINITY;  // running max of this row's raw scores (both lanes of the pair agree)
  float l = 0.0f;       // running sum of exp2(tau2 * (s - m)) over the keys seen so far

  for (int j = 0; j < Tc_i; ++j) {
    const int kv0 = j * Bc;              // first key of K_j, V_j
    const T* sK = stage_k(j % kStages);  // (Bc, D) dtype: K_j
    const T* sV = stage_v(j % kStages);  // (Bc, D) dtype: V_j

    //! [wait]
    // This thread's copies of tile j have landed: groups 0 .. j+kStages-2 are committed, and only
    // the kStages - 2 newest (tiles j+1 .. j+kStages-2) may still be in flight. At j = 0 this also
    // covers Q_i (group 0).
    cuda::pipeline_consumer_wait_prior<kStages - 2>(pipe);
    // (A) A thread's wait covers its own copies only: after this barrier every thread's pieces of
    // K_j, V_j (and at j = 0, Q_i) are complete and visible to every warp. It also means every warp
    // has finished tile j-1 — its fragment reads of stage (j-1) % kStages, and its own P, O strip
    // accesses — so that stage may be refilled below and this tile's S, P, O writes cannot overtake
    // last tile's reads.
    __syncthreads();
    //! [wait]

    //! [prefetch]
    // Tile j + kStages - 1 goes into the stage that tile j - 1 has just left; its copy runs during
    // all of tile j's math below. No thread waits for it until tile j + kStages - 1.
    prefetch(j + kStages - 1);
    //! [prefetch]

    //! [scores]
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
          wmma::load_matrix_sync(k_frag, sK + n * kF * kLdKV + kk * kF, kLdKV);
          wmma::mma_sync(s_frag[n], q_frag, k_frag, s_frag[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < Bc / kF; ++n) {
        wmma::store_matrix_sync(sS + warp_row0 * kLdS + n * kF, s_frag[n], kLdS,
                                wmma::mem_row_major);
      }
    }
    // (B) The S strip a warp stored is visible to all of its lanes (the softmax reads it in a
    // different layout). Only this warp reads it: no block-wide barrier (stage 03 needed one to
    // free the K/V buffer for V_j; V_j has its own buffer now, and is already there).
    __syncwarp();
    //! [scores]

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
    // (C) The P rows and the rescaled O rows that the lanes wrote are visible to the warp's
    // fragment loads below. V_j needs no barrier: (A) covered it with K_j.
    __syncwarp();

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
          wmma::load_matrix_sync(v_frag, sV + kk * kF * kLdKV + n * kF, kLdKV);
          wmma::mma_sync(o_frag, p_frag[kk], v_frag, o_frag);
        }
        wmma::store_matrix_sync(o_block, o_frag, kLdO, wmma::mem_row_major);
      }
    }
    // (D) is gone: the next tile's barrier (A) frees this stage and orders this tile's P, O
    // accesses before the next tile's.
    //! [pv]
  }

  //! [epilogue]
  // Only empty groups remain in flight here (or Q_i's, when the block visits no tile): drain them,
  // so that no copy outlives the block. Then (E): the O strip that the fragments stored (or the
  // lanes zeroed) is visible to the lanes of the warp that own its rows.
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncwarp();
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

FS_DEFINE_KERNEL_OF(fused_attention_kernel<T, Tile, kCausal>)
FS_EXPORT_KERNELS(TileD64)
FS_EXPORT_KERNELS(TileD128)
FS_EXPORT_KERNELS(TileD128Narrow)

}  // namespace flashsteps::cp_async
