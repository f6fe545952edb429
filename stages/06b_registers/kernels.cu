// =================================================================================================
// Stage 06b — registers: S, P and O never leave the warp (FlashAttention-2's data flow).
//
// What changed since stage 06a (its parent): the instruction (mma.sync.m16n8k16 + ldmatrix), the
// ring of K_j / V_j copies with its one barrier per tile, the per-warp ownership of 16 query rows,
// the padded rows, Bc = 64, exp2f and the launch order are 06a's. What moved into registers, now
// that a lane knows its rows:
//  * S_ij is accumulated in registers and the online softmax runs on the accumulator (a row's max
//    is 2 __shfl_xor_sync away in its quad; l is a per-lane partial sum, reduced in the epilogue).
//  * P_ij stays in registers: two adjacent n8 accumulators, rounded and packed, are the A operand
//    of the next m16n8k16. O_i is accumulated and rescaled in registers, as 06a's P·V loop order
//    already held it for the length of one tile.
//  * Q_i's warp strip is loaded once into A fragments, before the loop (one barrier after Q_i has
//    landed), and kept for the whole kernel; so the QK^T loop over k is unrolled completely (a
//    register array is indexed by constants only). Q_i is still copied by the whole block with
//    tile 0, as in 06a.
//  * O / l leaves through the warp's dead Q rows, in 16-byte coalesced stores as in 06a, which
//    staged O in an fp32 shared-memory tile that no longer exists.
//  * Shared memory holds Q and the ring only: 45 KiB (D = 64) and 85 KiB (D = 128) fit every
//    sm_80+ device, so 06a's narrow D = 128 tile for sm_86/89 is gone.
// The tuning that the register-resident kernel allows (Bc = 128 at D = 64, the unmasked fast path
// for causal tiles, the longest-first launch order, ex2.approx.ftz, a commit group per warp for
// Q) is stage 06c's, with the swizzle: that kernel is the one the committed run measured (06c's
// header).
//
//! [prediction]
// Which metric should move, and by how much (written before any GPU ran this stage, and rewritten
// with the step, still before any run). Per warp and 64 keys, against stage 06a:
//  * Shared-memory traffic (book/chapters/stage_06b_registers.md counts it): 06a moves Q, K, V
//    through ldmatrix and S, P, O through shared memory, 608 D + 12288 bytes: 50 KiB (D = 64) /
//    88 KiB (D = 128); here K and V only (Q once per block), 320 D: 20 / 40 KiB, 2.5x / 2.2x
//    fewer bytes. `l1tex__data_pipe_lsu_wavefronts_mem_shared.sum` per FLOP: -55% to -70% at
//    D = 64, -50% to -65% at D = 128 (the bytes say -60% and -55%; 06a's element-wise accesses
//    may cost more wavefronts per byte than its ldmatrix, never fewer).
//  * Bank conflicts on loads and stores -> 0: the padding puts the 8 rows of every ldmatrix phase
//    and of every 4-byte staging store in 8 different bank groups, and 8 consecutive 16-byte
//    chunks of a row (cp.async, the epilogue's reads) are 128 contiguous bytes.
//  * Latency vs stage 06a: 2-4x at S >= 2k, D = 64 and D = 128 (the tensor pipe no longer waits
//    for the S, P and O round trips, which were most of 06a's shared-memory traffic).
//  * Registers: 110-200 per thread at D = 64 (S 32, O 32, Q 16 fp32/packed registers, plus the
//    addresses), 190-255 at D = 128 (32 + 64 + 32), 0 spills (ptxas, sm_80/89/90).
//! [prediction]
//
// Limits: D = 64 and 128 only (the S and O strips are sized to the register file), fp16 and bf16,
// causal or not, any Sq, Skv >= 1, sm_80+, Q, K, V, O 16-byte aligned, B*H*Tr < 2^31 blocks. Not
// yet: 16 rows per warp means each K/V fragment feeds one warp's mma only (FA2's 32 rows per warp
// halve ldmatrix traffic but cannot also keep Q in registers at D = 128); the warps that copy also
// compute, in lock step at one barrier per tile; rows are padded by 16 bytes and every tile pays
// for the mask (stage 06c swizzles them instead, and tunes the tile loop); Hopper's wgmma and TMA
// are stages 07a's and 07b's. The reasoning:
// book/chapters/stage_06b_registers.md.
// =================================================================================================
#include <cuda/pipeline>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::registers_padded {
namespace {

// The per-thread pipeline of cp.async copies, exactly as in stage 04 (see its comment): commit
// groups per thread, one __syncthreads() per tile to publish a stage and to free it for refill.
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
// Who owns what. Each of the 4 warps owns a 16-row strip of the query block for the whole kernel,
// as in stage 04 — but now the strip lives in the warp's registers, spread over its lanes in the
// mma.m16n8k16 layouts. Lane 4g + t (g = lane / 4 = "groupID", t = tg = lane % 4) holds, of
// every n8-wide accumulator tile, rows g and g + 8, columns 2t and 2t + 1:
//
//   one (16, 8) fp32 accumulator tile, 4 regs/thread      the warp's strips (n8 tiles):
//            col 0 1 | 2 3 | 4 5 | 6 7                       S_ij, P_ij  (16, Bc): Bc/8 tiles
//     row 0      T0  |  T1 |  T2 |  T3   <- c0 c1            O_i         (16, D):  D/8 tiles
//     row 1      T4  |  T5 |  T6 |  T7                       Q_i         (16, D):  D/16 A frags
//     ...                                                                          (4 regs each)
//     row 7      T28 | T29 | T30 | T31
//     row 8      T0  |  T1 |  T2 |  T3   <- c2 c3
//     ...
//     row 15     T28 | T29 | T30 | T31
//
// A row of S, P, O is spread over the 4 lanes of one quad (4g .. 4g+3): its max and sum are two
// __shfl_xor_sync (offsets 1 and 2) away, and alpha of rows g, g+8 is known to the lanes that
// hold their O elements. Nothing is shared between warps but Q_i's copy and the K_j / V_j ring.
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
  constexpr int kLdQ = Tile::kLdQ, kLdKV = Tile::kLdKV;

  FS_DYNAMIC_SHARED(__align__(128) unsigned char, smem);
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);  // (Br, D) dtype, padded: Q_i, then O_i / l
  // Stage s of the ring: K (Bc, D) dtype, then V (Bc, D) dtype, both padded.
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
  const int g = lane / 4, tg = lane % 4;  // groupID, threadID_in_group (the ownership picture)
  // This thread's two rows: h = 0 is strip row g, h = 1 is strip row g + 8. Rows >= Sq (ragged
  // last block) are computed on zero-filled Q and never stored.
  const int my_row[2] = {row0 + warp_row0 + g, row0 + warp_row0 + g + 8};
  // Keys [0, kv_end) are visible to a row: the causal diagonal and Skv in one bound.
  const int kv_end[2] = {static_cast<int>(causal_kv_end(my_row[0], sh.sq, sh.skv, kCausal)),
                         static_cast<int>(causal_kv_end(my_row[1], sh.sq, sh.skv, kCausal))};

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
  //! [prologue]

  float o_acc[kON][4];  // (16, D) fp32 O_i strip: D/8 accumulator tiles (16, 8), 4 regs each
#pragma unroll
  for (int n = 0; n < kON; ++n)
    o_acc[n][0] = o_acc[n][1] = o_acc[n][2] = o_acc[n][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max of rows g, g+8 (the quad agrees)
  float l_run[2] = {0.0f, 0.0f};  // this lane's share of the running sums (quad-reduced at the end)

  // Per-lane ldmatrix offsets, before the kk / np / dp terms (stage 06a's, kernels.cu there has
  // the matrices each lane addresses): Q_i's strip (the A operand), K_j (x4), V_j (x4.trans).
  const std::uint32_t q_lane =
      ptx::smem_addr(sQ + (warp_row0 + lane % 16) * kLdQ + 8 * (lane / 16));
  const std::uint32_t k_lane =
      static_cast<std::uint32_t>(2 * ((lane % 8 + 8 * (lane / 16)) * kLdKV + 8 * ((lane / 8) % 2)));
  const std::uint32_t v_lane =
      static_cast<std::uint32_t>(2 * ((lane % 16) * kLdKV + 8 * (lane / 16)));

  //! [load_q]
  // The warp's Q strip as kQK A fragments, kept in registers for the whole kernel. Group 0 (Q_i,
  // with tile 0) is this thread's oldest; the barrier makes every thread's pieces of Q_i visible
  // (tile 0's barrier (A) below will find them landed already). x4 matrices: rows 0-7 / 8-15 x
  // columns 16kk..+7 / +8..+15 -> a0, a1, a2, a3, so lane l points at strip row l % 16, column
  // 16kk + 8 (l / 16): q_lane, 32 bytes per k-step.
  cuda::pipeline_consumer_wait_prior<kStages - 2>(pipe);
  __syncthreads();
  std::uint32_t q_frag[kQK][4];  // (16, D) dtype of Q_i: D/16 A fragments (16, 16), 4 regs each
#pragma unroll
  for (int kk = 0; kk < kQK; ++kk)
    ptx::ldmatrix_x4(q_frag[kk], q_lane + 32u * kk);
  //! [load_q]

  // One tile: wait for it, refill the stage the last tile left, S = Q K^T, the online softmax,
  // O = alpha O + P V.
  for (int j = 0; j < Tc_i; ++j) {
    const int kv0 = j * Bc;                                         // first key of K_j, V_j
    const std::uint32_t sK = ptx::smem_addr(stage_k(j % kStages));  // (Bc, D) dtype: K_j
    const std::uint32_t sV = ptx::smem_addr(stage_v(j % kStages));  // (Bc, D) dtype: V_j

    //! [wait]
    // This thread's copies of tile j have landed: groups 0 .. j+kStages-2 are committed, and only
    // the kStages - 2 newest may still be in flight. (A) then makes every thread's pieces visible
    // to every warp, and tells that every warp has finished tile j-1's ldmatrix reads of stage
    // (j-1) % kStages, which is refilled right below. It is the loop's only block-wide barrier.
    cuda::pipeline_consumer_wait_prior<kStages - 2>(pipe);
    __syncthreads();
    prefetch(j + kStages - 1);
    //! [wait]

    //! [scores]
    // S_ij strip (16, Bc) = Q_i strip (16, D) x K_j^T (D, Bc). K_j is stored (Bc, D) row-major,
    // which is K^T column-major: the ".col" B operand, read by ldmatrix without .trans.
    float s_acc[kSN][4];  // (16, Bc) fp32 S_ij strip: Bc/8 accumulator tiles (16, 8), 4 regs each
#pragma unroll
    for (int n = 0; n < kSN; ++n)
      s_acc[n][0] = s_acc[n][1] = s_acc[n][2] = s_acc[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kQK; ++kk) {
#pragma unroll
      for (int np = 0; np < kSN / 2; ++np) {
        std::uint32_t kb[4];  // (16 keys, 16 k) of K_j: B fragments of n8 tiles 2np, 2np+1
        ptx::ldmatrix_x4(kb, sK + 2u * (16 * np * kLdKV + 16 * kk) + k_lane);
        ptx::mma_m16n8k16<T>(s_acc[2 * np], q_frag[kk], {kb[0], kb[1]});
        ptx::mma_m16n8k16<T>(s_acc[2 * np + 1], q_frag[kk], {kb[2], kb[3]});
      }
    }
    // Element e of tile n is column kv0 + 8n + 2tg + (e % 2) of row h = e / 2. A column the row
    // does not see (past its causal diagonal, or past Skv: K's zero-filled rows) becomes -inf, and
    // contributes exp2(-inf) = 0 below.
#pragma unroll
    for (int n = 0; n < kSN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (kv0 + 8 * n + 2 * tg + (e % 2) >= kv_end[e / 2]) s_acc[n][e] = -INFINITY;
    //! [scores]

    //! [online_softmax]
    // On the accumulator, in place: row h of this lane is s_acc[n][2h], s_acc[n][2h+1] for every
    // n; the other 3/4 of the row are in the quad's other lanes.
    float alpha[2];  // O_i and l of row h are rescaled by alpha[h] = exp2(tau2 * (m_old - m_new))
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m_run[h];
#pragma unroll
      for (int n = 0; n < kSN; ++n)
        mx = fmaxf(mx, fmaxf(s_acc[n][2 * h], s_acc[n][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));  // the quad's 4 lanes hold one row:
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));  // after two steps all 4 agree
      // A row that has seen no visible key yet has mx = -inf; subtracting a safe 0 instead keeps
      // exp2(-inf - -inf) = NaN out: alpha and every p are then exp2(-inf) = 0.
      const float m_scaled = (mx == -INFINITY ? 0.0f : mx) * sh.scale_log2;
      alpha[h] = exp2f(m_run[h] * sh.scale_log2 - m_scaled);  // 0 while m_run = -inf
      m_run[h] = mx;
      float row_sum = 0.0f;  // this lane's part of the row: Bc/4 of its columns
#pragma unroll
      for (int n = 0; n < kSN; ++n) {
        // p = exp2(tau2 * s - tau2 * m): the scale and log2(e) are folded into one FMA
        s_acc[n][2 * h] = exp2f(fmaf(s_acc[n][2 * h], sh.scale_log2, -m_scaled));
        s_acc[n][2 * h + 1] = exp2f(fmaf(s_acc[n][2 * h + 1], sh.scale_log2, -m_scaled));
        row_sum += s_acc[n][2 * h] + s_acc[n][2 * h + 1];
      }
      // l = alpha l + rowsum is linear and alpha is the same in the 4 lanes of the quad, so each
      // lane can carry its own share of l and the shares are added once, in the epilogue.
      l_run[h] = alpha[h] * l_run[h] + row_sum;
    }
#pragma unroll
    for (int n = 0; n < kON; ++n) {  // O_i = alpha O_i, in registers; P_ij V_j is added next
      o_acc[n][0] *= alpha[0];
      o_acc[n][1] *= alpha[0];
      o_acc[n][2] *= alpha[1];
      o_acc[n][3] *= alpha[1];
    }
    //! [online_softmax]

    //! [p_in_registers]
    // P_ij never leaves the registers. The A operand of m16n8k16 (k = 16 keys) is, per lane,
    // a0 = P[g][2t, 2t+1], a1 = P[g+8][2t, 2t+1], a2 = P[g][8+2t, 9+2t], a3 = P[g+8][8+2t, 9+2t];
    // the accumulators of the two n8 tiles that cover those 16 keys hold exactly these elements:
    //
    //      S/P accumulator tile 2kk (keys 16kk..+7)   tile 2kk+1 (keys 16kk+8..+15)
    //      row g   : c0 c1 (cols 2t, 2t+1)   -> a0     c0 c1 (cols 8+2t, 9+2t) -> a2
    //      row g+8 : c2 c3 (cols 2t, 2t+1)   -> a1     c2 c3 (cols 8+2t, 9+2t) -> a3
    //
    // so rounding each pair to the dtype and packing it (lower column in the low half) turns the
    // S accumulator into the P·V A fragment, with no data crossing lanes.
    // (P·V multiplies P rounded to the dtype; l summed the fp32 p, as in stage 04.)
    //! [p_in_registers]

    //! [pv]
    // O_i strip (16, D) += P_ij strip (16, Bc) x V_j (Bc, D). V_j is stored (Bc, D) = (k, n)
    // row-major; the B operand wants 2 consecutive k of one column per register, which is what
    // ldmatrix.trans delivers.
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk) {
      const std::uint32_t p_frag[4] = {// (16, 16) dtype of P_ij: keys 16kk..16kk+15, the A fragment
                                       pack2<T>(s_acc[2 * kk][0], s_acc[2 * kk][1]),
                                       pack2<T>(s_acc[2 * kk][2], s_acc[2 * kk][3]),
                                       pack2<T>(s_acc[2 * kk + 1][0], s_acc[2 * kk + 1][1]),
                                       pack2<T>(s_acc[2 * kk + 1][2], s_acc[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t vb[4];  // (16 keys, 16 d) of V_j: B fragments of O's n8 tiles 2dp, 2dp+1
        ptx::ldmatrix_x4_trans(vb, sV + 2u * (16 * kk * kLdKV + 16 * dp) + v_lane);
        ptx::mma_m16n8k16<T>(o_acc[2 * dp], p_frag, {vb[0], vb[1]});
        ptx::mma_m16n8k16<T>(o_acc[2 * dp + 1], p_frag, {vb[2], vb[3]});
      }
    }
    // No barrier after the tile: the next tile's (A) frees this stage.
    //! [pv]
  }

  //! [epilogue]
  // Only empty groups remain in flight here (Q_i's copies are complete: the wait before its
  // fragments covered them). The wait drains the empty ones, so that no copy outlives the block;
  // (E), the __syncwarp(), orders every lane's Q fragment reads before the staging writes below,
  // which reuse the warp's own Q rows.
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncwarp();
  float inv_l[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(kFullMask, l, 1);  // the quad's shares of the row's l, in a fixed
    l += __shfl_xor_sync(kFullMask, l, 2);  // order: every lane gets the same bits
    // O = O_i / l; LSE = tau * m + ln(l) = ln(2) * (tau2 * m + log2(l)). A row that saw no key
    // has l = 0: O = 0, LSE = -inf (never 0/0).
    inv_l[h] = l > 0.0f ? 1.0f / l : 0.0f;
    if (tg == 0 && my_row[h] < sh.sq) {
      lse[bh * sh.sq + my_row[h]] =
          l > 0.0f ? kLn2 * fmaf(m_run[h], sh.scale_log2, log2f(l)) : -INFINITY;
    }
  }
  // Stage the warp's (16, D) O strip in its Q rows (06a staged it in its fp32 O tile, which is
  // gone): a 4-byte store per accumulator pair; for each n8 tile the warp writes 8 rows x 4 lanes
  // at one 16-byte piece of the padded rows: 32 distinct banks.
  T* sO = sQ + warp_row0 * kLdQ;  // (16, D) dtype, padded: this warp's O_i / l
#pragma unroll
  for (int n = 0; n < kON; ++n) {
    *reinterpret_cast<std::uint32_t*>(sO + g * kLdQ + 8 * n + 2 * tg) =
        pack2<T>(o_acc[n][0] * inv_l[0], o_acc[n][1] * inv_l[0]);
    *reinterpret_cast<std::uint32_t*>(sO + (g + 8) * kLdQ + 8 * n + 2 * tg) =
        pack2<T>(o_acc[n][2] * inv_l[1], o_acc[n][3] * inv_l[1]);
  }
  // The staged strip is visible to all of the warp's lanes (only this warp reads it).
  __syncwarp();
  // The warp writes its own 16 rows of O, 16 bytes per lane and step, a whole row per D/8 lanes
  // (coalesced); the reads, 8 lanes on 128 contiguous bytes of a row: 32 distinct banks.
  constexpr int kPerRow = D / Tile::kVec;  // 16-byte pieces per row of O
#pragma unroll
  for (int step = 0; step < Tile::kWarpRows * kPerRow / 32; ++step) {
    const int idx = step * 32 + lane;
    const int r = idx / kPerRow, c = idx % kPerRow;  // strip row, piece of the row
    const uint4 piece = *reinterpret_cast<const uint4*>(sO + r * kLdQ + c * Tile::kVec);
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

}  // namespace flashsteps::registers_padded
