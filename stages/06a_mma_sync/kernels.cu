// =================================================================================================
// Stage 06a — mma.sync: the instruction WMMA compiles to, written by hand.
//
// What changed since stage 04 (its parent):
//  * The two products call mma.sync.m16n8k16 and load their operands with ldmatrix
//    (flashsteps/cuda/ptx.cuh) instead of WMMA. Stage 04's SASS already runs HMMA.16816 and LDSM:
//    the instruction is the same, but its register layout is now documented (PTX ISA 9.7.14.5.8)
//    and the kernel knows which lane holds which element (the runner's `--emulate --layout`).
//  * So the accumulators of S and O go to shared memory at their fragment positions (two fp32 of
//    one row per lane, one 8-byte access) and O comes back the same way; P and the Q, K, V
//    operands are read with ldmatrix.x4 (V with .trans) from the same padded tiles.
//  * P·V's two loops are turned around. Stage 04 held one (16, 16) WMMA block of O at a time,
//    the P strip's Bc/16 fragments loaded once, to keep its registers off the 255 ceiling; 06a
//    holds the warp's whole (16, D) O strip as D/8 accumulators (32 fp32 registers per thread at
//    D = 64, 64 at D = 128), loaded once per tile, and walks the keys outside: each P fragment is
//    loaded once and each ldmatrix.x4.trans of V feeds two mma. ptxas stays at or under 128
//    registers (predictions.csv checks it); stage 06b keeps this order, O in registers for good.
// Everything else — the ring, its one barrier, the shared-memory layout, the online softmax on
// rows of S in shared memory, the epilogue — is stage 04's code, line for line.
//
//! [prediction]
// Which metric should move, and by how much (written before any GPU ran this stage):
//  * SASS: the same tensor instructions as stage 04 — HMMA.16816.F32 (.BF16 for bf16) for the
//    products, LDSM.16.M88.4 and LDSM.16.MT88.4 for their operands — in the same number per tile
//    (64 HMMA per warp and 64-key tile at D = 64, 128 at D = 128).
//  * Latency: within about +-10% of stage 04 at every shape; nothing moved between memories.
//    What changes are the fp32 accesses of S and O (8-byte, at fragment positions, where WMMA's
//    store_matrix_sync chose its own): `smsp__average_warps_issue_stalled_long_scoreboard_...`
//    and the tensor pipe's share (`sm__pipe_tensor_op_hmma_cycles_active`) within +-10% of 04's.
//  * Registers: about stage 04's, at most 128 per thread and no spills (ptxas); the blocks an SM
//    holds are set by shared memory, as in stage 04.
// If this stage is much faster than 04, WMMA's code was not what its SASS suggests; if it is much
// slower, the 8-byte accumulator accesses conflict in banks where WMMA's did not.
//! [prediction]
//
// Limits: D = 64 and 128 only, fp16 and bf16, causal or not, any Sq, Skv >= 1; shared memory within
// the device's opt-in limit (checked before launch; the launcher picks the D = 128 tile by it);
// Q, K, V, O 16-byte aligned (checked at launch); B*H*Tr < 2^31 blocks. Not yet: S, P and O
// still make a shared-memory round trip per tile although each lane now knows its rows (stage
// 06b keeps them in registers). The reasoning: book/chapters/stage_06a_mma_sync.md.
// =================================================================================================
#include <cuda/pipeline>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::mma_sync {
namespace {

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
// Who owns what (unchanged since stage 03; only the fragments inside a strip changed). Each of the
// 4 warps owns a 16-row strip of the query block for the whole kernel: the same rows of Q_i, S_ij,
// P_ij and O_i, and the running m, l of those rows. Only K_j and V_j — the ring — are read by every
// warp, so only the ring needs block-wide barriers; a warp's own strips need __syncwarp() only.
//
//              columns of S_ij, P_ij: 0 .. Bc-1          columns of O_i: 0 .. D-1
//            +-----------------------------------+   +----------------------------------+
//    rows  0 | warp 0: Bc/8 mma (16, 8) tiles    |   | warp 0: D/8 mma (16, 8) tiles    |
//      ..15  |         (16, Bc) fp32 + P strip   |   |         (16, D) fp32 strip of O  |
//         16 | warp 1                            |   | warp 1                           |
//         32 | warp 2                            |   | warp 2                           |
//      48..63| warp 3                            |   | warp 3                           |
//            +-----------------------------------+   +----------------------------------+
//
// Inside a strip, the element-wise work (softmax, rescaling O, the epilogue) gives row r of the
// strip (0..15) to the lane pair (2r, 2r+1): lane 2r takes the even columns, lane 2r+1 the odd
// ones, and one __shfl_xor(…, 1) combines their partial max and sum. The pair keeps m and l of
// its row in registers, equal in both lanes. That is stage 04's layout, kept on purpose. With WMMA
// it was forced (a lane could not know which row a fragment element belongs to); with mma.sync it
// no longer is: lane 4g + t holds rows g and g + 8 of every accumulator tile (the picture below,
// and `--layout`). This stage still writes the fragments to shared memory at those positions, so
// that the one change against stage 04 is the instruction; stage 06b drops the round trip.
//
//   one (16, 8) fp32 accumulator tile of S or O, 4 regs per lane (PTX ISA 9.7.14.5.8):
//            col 0 1 | 2 3 | 4 5 | 6 7
//     row 0      T0  |  T1 |  T2 |  T3   <- c0 c1 of lanes 0..3
//     ...
//     row 7      T28 | T29 | T30 | T31
//     row 8      T0  |  T1 |  T2 |  T3   <- c2 c3 of lanes 0..3
//     ...
//     row 15     T28 | T29 | T30 | T31
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
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc;
  constexpr int kStages = Tile::Stages;
  constexpr int kQK = Tile::kQK, kSN = Tile::kSN, kPK = Tile::kPK, kON = Tile::kON;
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

  //! [lane_offsets]
  // ldmatrix.x4 reads four 8x8 matrices; lane 8m + i gives the address of row i of matrix m.
  // Per-lane byte offsets inside a tile, before the kk / np / dp terms:
  //  Q and P (the A operand): matrices = (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
  //    (rows 8-15, k 8-15) -> a0, a1, a2, a3: lane l points at strip row l % 16, column 8 (l / 16).
  //  K (x4, no trans): matrices = (keys 0-7, k 0-7), (keys 0-7, k 8-15), (keys 8-15, k 0-7),
  //    (keys 8-15, k 8-15) -> b0, b1 of n8 tile 2np and b0, b1 of tile 2np+1: lane l points at
  //    key row l % 8 + 8 * (l / 16), column 8 ((l / 8) % 2).
  //  V (x4.trans): matrices = (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15),
  //    (keys 8-15, d 8-15), transposed -> b0, b1 of n8 tile 2dp and of tile 2dp+1: lane l points
  //    at key row l % 16, column 8 (l / 16).
  // The padded strides keep every such row 16-byte aligned, and 8 rows in 8 different bank groups.
  const std::uint32_t q_lane =
      ptx::smem_addr(sQ + (warp_row0 + lane % 16) * kLdQ + 8 * (lane / 16));
  const std::uint32_t p_lane =
      ptx::smem_addr(sP + (warp_row0 + lane % 16) * kLdP + 8 * (lane / 16));
  const std::uint32_t k_lane =
      static_cast<std::uint32_t>(2 * ((lane % 8 + 8 * (lane / 16)) * kLdKV + 8 * ((lane / 8) % 2)));
  const std::uint32_t v_lane =
      static_cast<std::uint32_t>(2 * ((lane % 16) * kLdKV + 8 * (lane / 16)));
  // This lane's accumulator elements (the ownership picture): rows g and g + 8 of the strip,
  // columns 2t and 2t + 1 of every n8 tile.
  const int g = lane / 4, tg = lane % 4;
  //! [lane_offsets]

  for (int j = 0; j < Tc_i; ++j) {
    const int kv0 = j * Bc;                                         // first key of K_j, V_j
    const std::uint32_t sK = ptx::smem_addr(stage_k(j % kStages));  // (Bc, D) dtype: K_j
    const std::uint32_t sV = ptx::smem_addr(stage_v(j % kStages));  // (Bc, D) dtype: V_j

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
    // row-major (Bc, D), which read column-major is exactly K_j^T: the ".col" B operand, read by
    // ldmatrix without .trans. The k loop is unrolled only by 2, as in stage 04.
    {
      float s_acc[kSN][4];  // (16, Bc) fp32 S_ij strip: Bc/8 accumulator tiles (16, 8), 4 regs each
#pragma unroll
      for (int n = 0; n < kSN; ++n)
        s_acc[n][0] = s_acc[n][1] = s_acc[n][2] = s_acc[n][3] = 0.0f;
#pragma unroll 2
      for (int kk = 0; kk < kQK; ++kk) {
        std::uint32_t q_frag[4];  // (16, 16) dtype of the Q_i strip: the A fragment of step kk
        ptx::ldmatrix_x4(q_frag, q_lane + 32u * kk);
#pragma unroll
        for (int np = 0; np < kSN / 2; ++np) {
          std::uint32_t kb[4];  // (16 keys, 16 k) of K_j: B fragments of n8 tiles 2np, 2np+1
          ptx::ldmatrix_x4(kb, sK + 2u * (16 * np * kLdKV + 16 * kk) + k_lane);
          ptx::mma_m16n8k16<T>(s_acc[2 * np], q_frag, {kb[0], kb[1]});
          ptx::mma_m16n8k16<T>(s_acc[2 * np + 1], q_frag, {kb[2], kb[3]});
        }
      }
      //! [store_s]
      // Each lane stores its elements where they belong: tile n, rows g and g + 8, columns
      // 8n + 2tg and 8n + 2tg + 1 — one 8-byte store per row and tile.
#pragma unroll
      for (int n = 0; n < kSN; ++n) {
        float* s_el = sS + (warp_row0 + g) * kLdS + 8 * n + 2 * tg;
        *reinterpret_cast<float2*>(s_el) = make_float2(s_acc[n][0], s_acc[n][1]);
        *reinterpret_cast<float2*>(s_el + 8 * kLdS) = make_float2(s_acc[n][2], s_acc[n][3]);
      }
      //! [store_s]
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
    // O_i strip (16, D) += P_ij strip (16, Bc) x V_j (Bc, D). The O strip comes from shared memory
    // at its fragment positions (the rescaled rows the lanes wrote above) and goes back there: O
    // still makes one shared-memory round trip per tile. V_j is stored (Bc, D) = (k, n) row-major;
    // the B operand wants 2 consecutive k of one column per register: ldmatrix.trans.
    {
      float o_acc[kON][4];  // (16, D) fp32 O_i strip: D/8 accumulator tiles (16, 8), 4 regs each
#pragma unroll
      for (int n = 0; n < kON; ++n) {
        const float* o_el = sO + (warp_row0 + g) * kLdO + 8 * n + 2 * tg;
        const float2 top = *reinterpret_cast<const float2*>(o_el);
        const float2 bottom = *reinterpret_cast<const float2*>(o_el + 8 * kLdO);
        o_acc[n][0] = top.x, o_acc[n][1] = top.y, o_acc[n][2] = bottom.x, o_acc[n][3] = bottom.y;
      }
#pragma unroll
      for (int kk = 0; kk < kPK; ++kk) {
        std::uint32_t p_frag[4];  // (16, 16) dtype of P_ij: keys 16kk..16kk+15, the A fragment
        ptx::ldmatrix_x4(p_frag, p_lane + 32u * kk);
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          std::uint32_t vb[4];  // (16 keys, 16 d) of V_j: B fragments of O's n8 tiles 2dp, 2dp+1
          ptx::ldmatrix_x4_trans(vb, sV + 2u * (16 * kk * kLdKV + 16 * dp) + v_lane);
          ptx::mma_m16n8k16<T>(o_acc[2 * dp], p_frag, {vb[0], vb[1]});
          ptx::mma_m16n8k16<T>(o_acc[2 * dp + 1], p_frag, {vb[2], vb[3]});
        }
      }
#pragma unroll
      for (int n = 0; n < kON; ++n) {
        float* o_el = sO + (warp_row0 + g) * kLdO + 8 * n + 2 * tg;
        *reinterpret_cast<float2*>(o_el) = make_float2(o_acc[n][0], o_acc[n][1]);
        *reinterpret_cast<float2*>(o_el + 8 * kLdO) = make_float2(o_acc[n][2], o_acc[n][3]);
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

}  // namespace flashsteps::mma_sync
