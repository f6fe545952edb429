// =================================================================================================
// Stage 05 — warp specialization: producer warps copy, consumer warps compute, barriers hand over.
//
// What changed since stage 04 (whose one __syncthreads() per tile both published the copies and
// freed a stage, keeping the four warps in lock step):
//  * Roles. A fifth warp, the producer, only copies K_j, V_j into the ring (cp.async, as in 04).
//    The four consumer warps only compute — stage 04's math, unchanged — and copy nothing but
//    their own 16 rows of Q_i, once.
//  * Handoff. Each stage s of the ring has two cuda::barrier<thread_scope_block> (mbarriers):
//    full[s] completes when the producer's copies of a tile have landed, empty[s] when all 128
//    consumer threads are done reading it. Consumers wait on full, the producer on empty.
//  * No block-wide barrier in the main loop and no named barriers: the only __syncthreads() left
//    publishes the barriers' initialization, before the roles part.
// Tiles, shared-memory layout and the three configurations are stage 04's (+128 bytes of barriers).
//
//! [prediction]
// Which metric should move, and by how much (written before measuring). Per tile, D = 64 (D = 128
// with Bc = 64 in brackets), in instructions per thread and SM cycles, estimates to be refuted:
//  * Producer warp: 2 x 16 (2 x 32) cp.async per lane, ~100 (~200) instructions against a tile's
//    ~2,000 (~3,100) cycles of math: it idles > 90% of the time, waiting on empty[s]. On sm_90
//    the wait takes no issue slots; on sm_80/sm_89 it is a spin (~3 instructions per poll, a poll
//    every ~20-30 cycles: ~200 instructions per tile, +2-3% of the block's issued instructions);
//    plus `lg_throttle` while it pushes its copies back to back.
//  * Consumer warps: stage 04's stream minus ~30-60 of ~2,000 instructions per tile.
//    `smsp__average_warps_issue_stalled_barrier_per_issue_active` falls to ~0; waits on full[s]
//    should be rare; `short_scoreboard` and `mio_throttle` stay the dominant stalls.
//    `sm__warps_active` rises by 5/4 at the same blocks per SM.
//  * Stage 04 lost f ~ 0.1 of a block's time at its barrier. Expect 5-10% lower latency than stage
//    04 at S >= 1024 where one block runs per SM (A100 and L4 at every D, H100/H200 at D = 128),
//    0-3% where two blocks share an SM (H100/H200 at D = 64), and 0-5% worse for short or heavily
//    causal problems (the handoff's latency, which only a full ring hides).
//! [prediction]
//
// Limits: stage 04's — D = 64 and 128, fp16 and bf16, causal or not, any Sq, Skv >= 1; shared
// memory within the device's opt-in limit (checked before launch); 16-byte aligned Q, K, V, O;
// B*H*Tr < 2^31 blocks; sm_80 or newer (mbarrier, cp.async). Not yet: the prefetch distance is
// stage 04's; the producer's registers cannot be given away before Hopper (stage 07c); O and P
// still make a shared-memory round trip per tile (stage 06b); per-thread cp.async, not TMA
// (stage 07b). The reasoning and the verdicts: book/chapters/stage_05_warp_specialized.md.
// =================================================================================================
#include <cuda_pipeline_primitives.h>  // __pipeline_memcpy_async: cp.async with zero fill
#include <mma.h>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda/ptx>
#include <nv/target>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/watchdog.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::warp_specialized {
namespace {

namespace wmma = nvcuda::wmma;

// The per-thread pipeline of cp.async copies (stage 04). The producer no longer waits on its own
// commit groups: it binds its copies to a stage's full barrier instead (see the producer below).
using Pipeline = cuda::pipeline<cuda::thread_scope_thread>;

//! [barriers]
// One stage's handoff: an mbarrier in shared memory, through CCCL. A barrier counts arrivals;
// when the expected number has arrived, its current phase completes and the next one begins. It
// only remembers the parity of its current phase, so a waiter names the phase it needs by its
// parity — enough here because the ring never lets a barrier run two phases ahead of a waiter.
using Barrier = cuda::barrier<cuda::thread_scope_block>;
static_assert(sizeof(Barrier) == WarpSpecializedTraits<64, 64, 2>::kBarrierSlot,
              "the traits reserve one 8-byte mbarrier per barrier");

// Whether the phase of `bar` with this parity has completed; once it has, its arrivals' writes
// (and, for full[s], the copies bound to it) are visible to the caller. The mbarrier instructions
// through cuda::ptx (PTX ISA, "Parallel Synchronization and Communication Instructions:
// mbarrier.test_wait / mbarrier.try_wait"):
//   sm_90+       mbarrier.try_wait.parity: the hardware suspends the thread until the phase
//                completes or a time limit passes, so a waiting warp takes no issue slots;
//   sm_80/sm_89  mbarrier.test_wait.parity: a non-blocking test — the warp spins.
__device__ __forceinline__ bool phase_done(std::uint64_t* handle, std::uint32_t parity) {
  NV_IF_ELSE_TARGET(NV_PROVIDES_SM_90,
                    (return cuda::ptx::mbarrier_try_wait_parity(handle, parity);),
                    (return cuda::ptx::mbarrier_test_wait_parity(handle, parity);));
}

// Returns once the phase of `bar` with this parity has completed. Not Barrier::wait_parity(): on
// the device that is CCCL's generic poll-with-backoff, which reads the global timer before its
// first poll and to pace its backoff — costs that would be paid every tile here. `name` and
// `slot` only label the watchdog's message in test builds (flashsteps/cuda/watchdog.cuh).
__device__ __forceinline__ void wait_phase(Barrier& bar, std::uint32_t parity, const char* name,
                                           int slot) {
  std::uint64_t* handle = cuda::device::barrier_native_handle(bar);
  const watchdog::Spin spin;
  while (!phase_done(handle, parity)) {
    spin.check(name, slot, parity);
  }
}
//! [barriers]

//! [load_tile_async]
// Issues the copy of rows [row0, row0 + kRows) of one head's (n_rows, D) matrix into a padded
// shared-memory tile and returns without waiting, split over kCopyThreads threads of which the
// caller is number `rank` (stage 04: always the whole block; now the producer warp for K and V,
// and each consumer warp for its own rows of Q). One cp.async (cp.async.cg: 16 bytes, through L2,
// past L1 and the register file) per thread and step, consecutive threads on consecutive 16-byte
// pieces of a row (coalesced). Rows at or past n_rows — the ragged tail — are never read: their
// pieces are zero-filled (a stale NaN in V would survive the multiplication by a masked p = 0).
// Stage 04 stored those zeros with ordinary stores; here they are written by the copy unit too
// (cp.async with a source size of 0, which reads nothing and fills all 16 bytes with zeros), so
// that every write into a stage is an asynchronous copy — the only kind that full[s] tracks (see
// the producer).
// The thread's pieces are the same as stage 04's (piece rank + step * kCopyThreads), written as
// one column c and rows r0, r0 + kRowsPerStep, ...: every step's addresses are then one base plus
// a constant. Written as stage 04 wrote it, the producer's 32-64 steps per tile made the compiler
// keep 64 precomputed addresses live across the tile loop — 255 registers and spills, a count
// that every warp of the kernel is then allocated.
template <class Tile, int kRows, int kCopyThreads, class T>
__device__ __forceinline__ void load_tile_async(T* __restrict__ dst, int ld,
                                                const T* __restrict__ src, int row0, int n_rows,
                                                int rank, Pipeline& pipe) {
  constexpr int kPerRow = Tile::D / Tile::kVec;  // 16-byte pieces per row
  static_assert(kCopyThreads % kPerRow == 0 && kRows % (kCopyThreads / kPerRow) == 0,
                "the copying threads cover whole rows, and the tile is a whole number of steps");
  constexpr int kRowsPerStep = kCopyThreads / kPerRow;  // rows the threads cover per step
  const int r0 = rank / kPerRow, c = rank % kPerRow;    // first row, and piece of every row
  T* dst_piece = dst + r0 * ld + c * Tile::kVec;        // (8) dtype in smem, step 0
  const T* src_piece = src + (std::int64_t{row0} + r0) * Tile::D + c * Tile::kVec;
  const int rows_in_bounds = n_rows - row0 - r0;  // of rows r0, r0 + kRowsPerStep, ...
#pragma unroll
  for (int step = 0; step < kRows / kRowsPerStep; ++step) {
    T* piece = dst_piece + step * kRowsPerStep * ld;  // (8) dtype in smem
    if (step * kRowsPerStep < rows_in_bounds) {
      cuda::memcpy_async(piece, src_piece + step * kRowsPerStep * Tile::D,
                         cuda::aligned_size_t<16>(16), pipe);
    } else {
      // The toolkit's pipeline primitive with zfill = 16: cp.async.cg [piece], [src], 16, 0. The
      // source must still be a valid address, though nothing is read: the head's first row.
      __pipeline_memcpy_async(piece, src, 16, /*zfill=*/16);
    }
  }
}
//! [load_tile_async]

//! [ownership]
// Who owns what. Warps 0..3 are consumers: each owns a 16-row strip of the query block for the
// whole kernel — the same rows of Q_i, S_ij, P_ij and O_i, and the running m, l of those rows —
// exactly as in stages 03 and 04. Warp 4 (and up, with more producer warps) is the producer: it
// owns nothing but the writes into the ring.
//
//              columns of S_ij, P_ij: 0 .. Bc-1          columns of O_i: 0 .. D-1
//            +-----------------------------------+   +----------------------------------+
//    rows  0 | warp 0: Bc/16 WMMA 16x16 tiles    |   | warp 0: D/16 WMMA 16x16 tiles    |
//      ..15  |         (16, Bc) fp32 + P strip   |   |         (16, D) fp32 strip of O  |
//         16 | warp 1                            |   | warp 1                           |
//         32 | warp 2                            |   | warp 2                           |
//      48..63| warp 3                            |   | warp 3                           |
//            +-----------------------------------+   +----------------------------------+
//    warp 4: producer — K_j, V_j into stage j % kStages of the ring
//
// Inside a strip, the element-wise work (softmax, rescaling O, the epilogue) gives row r of the
// strip (0..15) to the lane pair (2r, 2r+1): lane 2r takes the even columns, lane 2r+1 the odd
// ones, and one __shfl_xor(…, 1) combines their partial max and sum. The pair keeps m and l of
// its row in registers, equal in both lanes. WMMA's register layout is opaque (a lane cannot
// know which row an accumulator element belongs to), which is why S and O pass through shared
// memory where rows are addressable: the per-row alpha cannot be applied to a fragment.
//! [ownership]

//! [handoff]
// The handoff, kStages = 2. Tile j lives in stage s = j % 2 and is the (j / 2)-th tile through it,
// so the phase of full[s] that announces it, and the phase of empty[s] that releases it, are
// phase number j / 2 of those barriers: the parity (j / 2) & 1 names them.
//
//   producer                                    consumers (each of the 128 threads)
//   copy K_0,V_0 -> stage 0, arrive full[0]     wait full[0] parity 0 (tile 0 landed)
//   copy K_1,V_1 -> stage 1, arrive full[1]     math on stage 0; arrive empty[0] (phase 0)
//   wait empty[0] parity 0 (tile 0 released)    wait full[1] parity 0
//   copy K_2,V_2 -> stage 0, arrive full[0]     math on stage 1; arrive empty[1] (phase 0)
//   wait empty[1] parity 0                      wait full[0] parity 1 (tile 2 landed)
//   copy K_3,V_3 -> stage 1, arrive full[1]     math on stage 0; arrive empty[0] (phase 1)
//   wait empty[0] parity 1 ...                  ...
//
// Why a parity cannot be confused with an older or newer phase: full[s] can only move past phase
// j / 2 once tile j + 2 is copied, which waits for this consumer to release tile j; empty[s] can
// only move past a phase once the producer has refilled the stage, which it does after its wait.
//! [handoff]

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
  Barrier* full = reinterpret_cast<Barrier*>(smem + Tile::kOffFull);    // [kStages]
  Barrier* empty = reinterpret_cast<Barrier*>(smem + Tile::kOffEmpty);  // [kStages]
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

  // The block's last row sees the most keys (the mask is monotone in the row): tiles past its last
  // visible key are masked for every row, and are skipped. Tc_i = 0 when no row sees a key. Both
  // roles compute the same Tc_i, so the producer copies exactly the tiles the consumers wait for.
  const int last_row = min(row0 + Br, sh.sq) - 1;
  const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, sh.skv, kCausal));
  const int Tc_i = (kv_stop + Bc - 1) / Bc;

  //! [barriers_init]
  // full[s] expects one arrival per producer thread, each made only once that thread's copies into
  // stage s have landed; empty[s] expects one arrival per consumer thread.
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      init(&full[s], Tile::kProducerThreads);
      init(&empty[s], Tile::kConsumerThreads);
    }
  }
  // The kernel's only block-wide barrier: every thread sees initialized barriers before anyone
  // arrives on or waits for them. After it the roles part and never meet again.
  __syncthreads();
  //! [barriers_init]

  //! [producer]
  if (warp >= Tile::kConsumerWarps) {
    const int rank = static_cast<int>(threadIdx.x) - Tile::kConsumerThreads;  // among producers
    Pipeline pipe = cuda::make_pipeline();
    for (int j = 0; j < Tc_i; ++j) {
      const int s = j % kStages;
      // The ring starts empty: tiles 0 .. kStages-1 go straight in. Tile j >= kStages reuses the
      // stage of tile j - kStages and waits for its release: phase (j / kStages - 1) of empty[s].
      if (j >= kStages) wait_phase(empty[s], (j / kStages - 1) & 1, "empty", s);
      load_tile_async<Tile, Bc, Tile::kProducerThreads>(stage_k(s), kLdKV, k_head, j * Bc, sh.skv,
                                                        rank, pipe);  // K_j (Bc, D)
      load_tile_async<Tile, Bc, Tile::kProducerThreads>(stage_v(s), kLdKV, v_head, j * Bc, sh.skv,
                                                        rank, pipe);  // V_j (Bc, D)
      // Announce tile j on full[s] without waiting for it: cp.async.mbarrier.arrive.noinc makes
      // this thread's arrival on full[s] asynchronous — the hardware makes it once all of the
      // thread's copies issued so far have landed. It is one of the kProducerThreads arrivals the
      // barrier expects (.noinc: it does not add one more), so the phase completes when every
      // producer thread's copies into the stage have landed, zero-filled rows included.
      cuda::ptx::cp_async_mbarrier_arrive_noinc(cuda::device::barrier_native_handle(full[s]));
    }
    // No copy outlives the thread that issued it: close the copies in one group and wait for it
    // (they are the last tile's, which the consumers are waiting for anyway).
    pipe.producer_commit();
    cuda::pipeline_consumer_wait_prior<0>(pipe);
    return;
  }
  //! [producer]

  //! [consumer]
  // Consumers from here on: warps 0 .. kConsumerWarps-1, with stage 04's row ownership.
  const int warp_row0 = warp * Tile::kWarpRows;  // first row of this warp's strip in the tile
  const int r_tile = warp_row0 + lane / 2;       // the row this lane's pair owns, in the tile
  const int half = lane % 2;                     // even (0) or odd (1) columns of that row
  const int row = row0 + r_tile;  // its query row; >= Sq in a ragged last block: computed, not kept
  // Keys [0, kv_end) are visible to this row: the causal diagonal and Skv in one bound.
  const int kv_end = static_cast<int>(causal_kv_end(row, sh.sq, sh.skv, kCausal));

  // Each consumer warp copies its own 16 rows of Q_i (16, D) and zeroes its own O strip (16, D)
  // fp32 while the producer's first tiles are in flight: only its own lanes read either, so a wait
  // on its own copies and a __syncwarp() publish them — no block-wide barrier.
  {
    Pipeline pipe = cuda::make_pipeline();
    load_tile_async<Tile, Tile::kWarpRows, 32>(sQ + warp_row0 * kLdQ, kLdQ, q_head,
                                               row0 + warp_row0, sh.sq, lane, pipe);
    pipe.producer_commit();
    for (int e = lane; e < Tile::kWarpRows * D; e += 32)
      sO[(warp_row0 + e / D) * kLdO + e % D] = 0.0f;
    cuda::pipeline_consumer_wait_prior<0>(pipe);
    __syncwarp();
  }
  //! [consumer]

  float m = -INFINITY;  // running max of this row's raw scores (both lanes of the pair agree)
  float l = 0.0f;       // running sum of exp2(tau2 * (s - m)) over the keys seen so far

  for (int j = 0; j < Tc_i; ++j) {
    const int kv0 = j * Bc;         // first key of K_j, V_j
    const int stage = j % kStages;  // where the producer put tile j
    const T* sK = stage_k(stage);   // (Bc, D) dtype: K_j
    const T* sV = stage_v(stage);   // (Bc, D) dtype: V_j

    //! [consumer_wait]
    // (A) Tile j has landed: phase j / kStages of full[stage] completes once every producer thread
    // has arrived and all of their copies into the stage are done, and the wait makes those writes
    // visible to this thread. It replaces stage 04's wait_group + __syncthreads(); no consumer
    // waits for another consumer.
    wait_phase(full[stage], (j / kStages) & 1, "full", stage);
    //! [consumer_wait]

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
    // different layout). Only this warp reads it: no block-wide barrier. Without stage 04's (A)
    // this __syncwarp() is also what orders the previous tile's fragment accesses of this warp's
    // P and O strips before the softmax below writes P and rescales O.
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
    //! [pv]

    //! [release]
    // (D) This thread has read its last of stage `stage` (K_j in the scores, V_j just above): it
    // is one of the 128 arrivals that complete phase j / kStages of empty[stage] and let the
    // producer refill the stage with tile j + kStages. arrive() has release semantics, so this
    // thread's reads of the stage are ordered before the producer's copies into it.
    (void)empty[stage].arrive();
    //! [release]
  }

  //! [epilogue]
  // (E) The O strip that the fragments stored (or the lanes zeroed) is visible to the lanes of the
  // warp that own its rows.
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

}  // namespace flashsteps::warp_specialized
