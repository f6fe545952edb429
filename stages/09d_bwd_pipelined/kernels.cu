// =================================================================================================
// Stage 09d — loads in flight: stage 09c's tensor-core backward with Q_i, dO_i, LSE_i and D_i of
// the next query tiles copied by cp.async into a ring while this tile's five products run —
// FlashAttention-2's own backward.
//
// What changed since stage 09c:
//  * Q_i, dO_i (rows of 16-byte cp.async pieces) and LSE_i, D_i (4-byte cp.async, one row per
//    thread) land in a ring of kStages = 2 slots, tile i in slot i % kStages (kernels.cuh), on a
//    thread-scope cuda::pipeline, as K/V do in the forward stages 04 and 06c. K_j and V_j come in
//    the same way, in the first commit group with the first query tile. No element-wise copy is
//    left.
//  * The refill of a slot goes right after barrier (C) of the tile that last read it: Sᵀ, dPᵀ, the
//    recompute and dK_j, dV_j read Q_i, dO_i, LSE_i, D_i, all before (C); dQ reads only dSᵀ and
//    K_j. So tile i + kStages is in flight during tile i's dQ and all of tile i+1 .. i+kStages-1.
//  * Two block-wide barriers per tile instead of three: (A), after the wait for tile i's group,
//    both publishes the slot and (as before) frees dSᵀ; 09c's (B) is gone.
//  * The launcher refuses a dO that is not 16-byte aligned (Q, K, V by require_aligned()).
// Unchanged: the five products, their operands and fragments, the recompute, the causal walk, dQ
// by fp32 atomicAdd into the workspace and its conversion, D by the first kernel.
//
//! [prediction]
// Which metric should move (written before measuring, before any GPU run). 09c copies Q_i, dO_i
// element by element (2·Br·D / 128 = 64 two-byte loads and stores per thread and tile) between two
// barriers, with every warp idle at (B) until the slowest load arrives from L2 or DRAM: by 09c's
// own prediction that exposed copy and the barriers are most of what keeps it under 30% of the
// tensor peak. Here the copy is issued one tile ahead (8 cp.async of 16 bytes per thread and tile
// at either head dim) and is waited for at (A), by when it has had a whole tile's math — 640
// mma.sync per warp, some thousands of cycles — to land: the exposed part should fall to the
// latency of a wait that is already satisfied. What is left of 09c's costs: the dQ atomics
// (Br·D per tile pair), two barriers per tile, and one fewer resident block per SM (64 and 73.5
// KiB of shared memory: 2 blocks on sm_80, 3 on sm_90, against 09c's 3 and 4 at D = 64; same at
// D = 128 on sm_80). So:
//  * 1.2x to 2x faster than 09c at S = 2048, D = 64 and 128, causal or not (the copy was 20% to
//    50% of 09c's time, the occupancy loss gives some of it back at D = 64);
//  * against SDPA's flash backward (FlashAttention-2, measured in the same run) 0.5x to 1.0x at
//    D = 64 and 128, S = 2048: the issue's target, level (0.95x or more), needs FA2's larger
//    tiles too (128 keys per block with 8 warps at D = 64, 128 x 64 at D = 128), so reaching it
//    with this tile would mean the atomics and barriers cost less than assumed;
//  * registers: within 09c's 128 (D = 64) and 160 (D = 128) accumulators plus up to 24 for the
//    ring's addresses, no spill.
//! [prediction]
//
// Limits: D = 64 and 128, fp16 and bf16, causal or not, any Sq, Skv >= 1, sm_80+ (cp.async,
// mma.sync with bf16, ldmatrix); Q, K, V, O and dO 16-byte aligned (checked at launch);
// B·H·⌈Skv/64⌉ < 2^31 blocks; the fp32 accumulator and D (4·B·H·Sq·(D+1) bytes) must fit in
// device memory. dQ is not bitwise reproducible on a GPU (09b's reason: the atomics' order); dK
// and dV are. Rows that see no key get dQ = 0, keys no row sees dK = dV = 0. The chapter:
// book/chapters/stage_09d_bwd_pipelined.md.
// =================================================================================================
#include <cuda/pipeline>

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

// The per-thread pipeline of cp.async copies, as in stages 04 and 06c: a thread closes a commit
// group (producer_commit) and later waits until at most N of its newest groups are in flight
// (pipeline_consumer_wait_prior<N>); a barrier after the wait makes every thread's copies visible.
using Pipeline = cuda::pipeline<cuda::thread_scope_thread>;

//! [load_rows_async]
// Issues the copy of rows [row0, row0 + kRows) of a head's (n_rows, D) matrix into a shared tile
// with leading dimension ld, one 16-byte cp.async per thread and step, consecutive threads on
// consecutive pieces of a row; rows at or past n_rows become zeros, stored by the thread (never
// read from global memory). The copies join this thread's open commit group.
template <int kRows, int kD, int kThreads, class T>
__device__ __forceinline__ void load_rows_async(T* __restrict__ dst, int ld,
                                                const T* __restrict__ src, std::int64_t row0,
                                                std::int64_t n_rows, Pipeline& pipe) {
  constexpr int kVec = 16 / sizeof(T), kPerRow = kD / kVec;  // 16-byte pieces per row
#pragma unroll
  for (int step = 0; step < kRows * kPerRow / kThreads; ++step) {
    const int e = step * kThreads + static_cast<int>(threadIdx.x);
    const int r = e / kPerRow, c = e % kPerRow * kVec;
    if (row0 + r < n_rows)
      cuda::memcpy_async(dst + r * ld + c, src + (row0 + r) * kD + c, cuda::aligned_size_t<16>(16),
                         pipe);
    else
      *reinterpret_cast<uint4*>(dst + r * ld + c) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// LSE_i and D_i of rows [row0, row0 + kRows): one 4-byte cp.async per thread and row (a head's
// rows start at any 4-byte boundary); rows at or past n_rows get 0, stored.
template <int kRows>
__device__ __forceinline__ void load_row_stats_async(
    float* __restrict__ dst_lse, float* __restrict__ dst_delta, const float* __restrict__ lse,
    const float* __restrict__ delta, std::int64_t row0, std::int64_t n_rows, Pipeline& pipe) {
  const int r = static_cast<int>(threadIdx.x);
  if (r >= kRows) return;
  if (row0 + r < n_rows) {
    cuda::memcpy_async(dst_lse + r, lse + row0 + r, cuda::aligned_size_t<4>(4), pipe);
    cuda::memcpy_async(dst_delta + r, delta + row0 + r, cuda::aligned_size_t<4>(4), pipe);
  } else {
    dst_lse[r] = 0.0f;
    dst_delta[r] = 0.0f;
  }
}
//! [load_rows_async]

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
  T* sK = reinterpret_cast<T*>(smem + Tile::kOffK);     // (Bc, D) dtype: K_j
  T* sV = reinterpret_cast<T*>(smem + Tile::kOffV);     // (Bc, D) dtype: V_j
  T* sdSt = reinterpret_cast<T*>(smem + Tile::kOffDS);  // (Bc, Br) dtype: dSᵀ_ij
  // Slot i % kStages of the ring: Q_i, dO_i (Br, D) dtype, LSE_i, D_i (Br) fp32.
  auto slot = [&](int i) { return smem + Tile::kOffRing + i % Tile::kStages * Tile::kSlotBytes; };

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

  const int i_first = first_query_tile<Br, kCausal>(kv0, sh);
  const int tr = static_cast<int>((sh.sq + Br - 1) / Br);
  //! [ring]
  Pipeline pipe = cuda::make_pipeline();
  // Issues this thread's copies of Q_i, dO_i, LSE_i, D_i into slot i % kStages and closes its
  // commit group; past the last tile the group is empty but still committed, so that the group
  // of tile i is always the kStages-th newest at the top of tile i.
  auto prefetch = [&](int i) {
    if (i < tr) {
      const std::int64_t row0 = std::int64_t{i} * Br;
      unsigned char* s = slot(i);
      load_rows_async<Br, D, kThreads>(reinterpret_cast<T*>(s + Tile::kOffQ), kLd, q_head, row0,
                                       sh.sq, pipe);
      load_rows_async<Br, D, kThreads>(reinterpret_cast<T*>(s + Tile::kOffDO), kLd, do_head, row0,
                                       sh.sq, pipe);
      load_row_stats_async<Br>(reinterpret_cast<float*>(s + Tile::kOffLse),
                               reinterpret_cast<float*>(s + Tile::kOffDelta), lse_head, dsum_head,
                               row0, sh.sq, pipe);
    }
    pipe.producer_commit();  // cp.async.commit_group
  };
  // K_j and V_j stay in shared memory for the whole walk: they ride the first tile's group.
  load_rows_async<Bc, D, kThreads>(sK, kLd, k + bh * sh.skv * D, kv0, sh.skv, pipe);
  load_rows_async<Bc, D, kThreads>(sV, kLd, v + bh * sh.skv * D, kv0, sh.skv, pipe);
#pragma unroll
  for (int p = 0; p < Tile::kStages; ++p)
    prefetch(i_first + p);
  //! [ring]

  // The warp's strips of dK_j and dV_j, (16 keys, D) fp32 as D/8 accumulator tiles (16, 8):
  // element e of tile n is key my_key[e / 2], column 8n + 2t + e % 2.
  float dk_acc[kDN][4] = {};  // dK_j / scale
  float dv_acc[kDN][4] = {};  // dV_j

  const std::uint32_t sK_a = ptx::smem_addr(sK + key0 * kLd + lane_a(lane, kLd));
  const std::uint32_t sV_a = ptx::smem_addr(sV + key0 * kLd + lane_a(lane, kLd));
  constexpr std::uint32_t kRow = kLd * sizeof(T);  // bytes per row of K_j, V_j, Q_i, dO_i

  //! [walk]
  for (int i = i_first; i < tr; ++i) {
    const std::int64_t row0 = std::int64_t{i} * Br;  // first row of Q_i
    // This thread's copies of tile i have landed: only the kStages - 1 newest groups (tiles
    // i+1 .. i+kStages-1) may still be in flight. At the first tile this covers K_j, V_j too.
    cuda::pipeline_consumer_wait_prior<Tile::kStages - 1>(pipe);
    // (A) Every thread's pieces of tile i (and at the first tile K_j, V_j) are visible to every
    // warp, and every warp is done with the last tile's dSᵀ_ij before it is overwritten.
    __syncthreads();
    T* sQ = reinterpret_cast<T*>(slot(i) + Tile::kOffQ);                  // (Br, D) dtype: Q_i
    T* sdO = reinterpret_cast<T*>(slot(i) + Tile::kOffDO);                // (Br, D) dtype: dO_i
    float* sLse = reinterpret_cast<float*>(slot(i) + Tile::kOffLse);      // (Br) fp32: LSE_i
    float* sDelta = reinterpret_cast<float*>(slot(i) + Tile::kOffDelta);  // (Br) fp32: D_i
    const std::uint32_t sQ_b = ptx::smem_addr(sQ + lane_b(lane, kLd));
    const std::uint32_t sdO_b = ptx::smem_addr(sdO + lane_b(lane, kLd));
    const std::uint32_t sQ_bt = ptx::smem_addr(sQ + lane_a(lane, kLd));
    const std::uint32_t sdO_bt = ptx::smem_addr(sdO + lane_a(lane, kLd));
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
    // (C) Every warp's dSᵀ strip is in shared memory before any warp reads dS across the strips,
    // and every warp is done with slot i % kStages: dQ below reads only dSᵀ and K_j.
    __syncthreads();
    //! [dkdv]
    //! [refill]
    // Tile i + kStages goes into the slot tile i has just left; it flies during this tile's dQ
    // and the next kStages - 1 tiles.
    prefetch(i + Tile::kStages);
    //! [refill]

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

  // Only empty groups are left in flight here (or K_j, V_j's, when the walk was empty): drain
  // them, so that no copy outlives the thread.
  cuda::pipeline_consumer_wait_prior<0>(pipe);

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
// The fused kernel uses 64 and 73.5 KiB of dynamic shared memory (kernels.cuh): above 48 KiB a
// kernel must opt in, per function.
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
