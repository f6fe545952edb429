// =================================================================================================
// Stage 07a — wgmma: stage 06c's kernel on Hopper's warpgroup MMA, one warpgroup per block.
//
// What changed since stage 06c (its parent): the data flow is 06c's — cp.async ring with one
// barrier per tile, S, P and O in registers, the softmax on the accumulator, P fed back as the A
// operand, the causal fast path, the staged epilogue. The instruction that multiplies changed:
//  * mma.sync.m16n8k16 per warp + ldmatrix -> wgmma.mma_async m64nNk16 per warpgroup: the block
//    is one warpgroup (128 threads) owning Br = 64 query rows, wgmma's m; Bc = 128 at both head
//    dims. The tensor cores read Q, K and V straight from shared memory through 64-bit matrix
//    descriptors: S = Q K^T with both operands K-major, O += P V with P from registers (the
//    accumulator of S, repacked as in 06c) and V MN-major. No ldmatrix, no Q fragments.
//  * Shared memory takes the layout the descriptors read: rows of 128 bytes in (rows, 64)
//    column blocks, chunk c of row r at c ^ (r % 8) inside 1024-byte atoms (06c's XOR swizzle,
//    cut into 64-column blocks); the cp.async destinations compute it (swizzle()).
//  * wgmma is asynchronous: wgmma.fence before it uses accumulator or A registers that ordinary
//    instructions touched (a register fence: shared memory is the proxy fence's, below),
//    commit_group to close a batch, wait_group<0> before the results are read — waited at once,
//    so nothing overlaps yet (07d).
//  * cp.async writes shared memory through the generic proxy, wgmma reads it through the async
//    proxy: fence.proxy.async between them (the tile's wait).
//  * Hopper only: wgmma exists for sm_90a alone (launcher.cu refuses other devices).
// Riders (changes the step makes that its lesson does not need; measured with it, not apart):
//  * the ring has 3 stages at both head dims (06c: 2);
//  * D = 128 takes Bc = 128 keys per tile (06c: 64): wgmma's n could stay 64. D = 64 keeps 128.
//
//! [prediction]
// Which metric should move, and by how much (written before any GPU ran this stage; H100 SXM,
// fp16, non-causal, S >= 2k, against the committed run's stage 06c (measured as 06_registers) and
// stage 07d (FA3's design, measured as 07_hopper) at S = 2k: their rates are in their chapters'
// generated tables, and the model ledger's inputs, book page model_ledger, read 07d's from the
// run):
//  * SASS: HGMMA.64x128x16 (S; and P V at D = 128) and HGMMA.64x64x16 (P V at D = 64) replace
//    HMMA.16816; LDSM disappears; LDGSTS stays (no UTMALDG, no SYNCS: no TMA, no mbarrier).
//  * Shared memory through the LSU: the ldmatrix reads (4 warps x K_j and V_j per tile, 4x the
//    ring's bytes) leave the LSU — wgmma reads its operands itself — and the cp.async writes stay:
//    `l1tex__data_pipe_lsu_wavefronts_mem_shared.sum` per FLOP -75% to -85% against 06c.
//  * Throughput. Model per tile and block: 4 * 64 * 128 * D FLOP on the tensor cores at the rate
//    stage 07d reached at D = 128 (its measured rate per SM, read then as ~1,550 cycles for these
//    FLOP with the tensor pipe as its bound; the model ledger finds its softmax the bound), then
//    the softmax of 64 x 128 scores (~800 cycles for one warpgroup), then ~200 cycles of waits and
//    the barrier, all in sequence. D = 128, one block per SM: ~1,550 + 800 + 200 cycles per 4.2
//    MFLOP -> ~1,650 FLOP/cycle/SM: 320-440 TFLOP/s, 1.1-1.5x stage 06c, 0.5-0.7x stage
//    07d.
//    D = 64, two blocks per SM, whose tiles interleave: bounded by the softmax rate stage 07d shows
//    at D = 64 (its two warpgroups per SM are softmax-bound there): 290-380 TFLOP/s, 1.1-1.4x
//    stage 06c, 0.7-0.9x stage 07d. Causal: 10-25% fewer TFLOP/s (the diagonal tiles' mask).
//  * Registers: S 64 + P 32 + O D/2 per thread -> ptxas uses 170-240 of the 255 that
//    __launch_bounds__(128, 1) allows, 0 spills.
//! [prediction]
//
// Revised after the CPU emulator counted this stage (no GPU has run it; predictions.csv judges the
// first range above): the H100's shared-wavefront count also includes wgmma's operand reads, one
// per 128 bytes (stage 07d's committed profile matches only with them, emu/README.md). Per 64 rows
// and 128 keys that is 1,152 D bytes against 06c's 2,560 D: -45% to -60% per FLOP, not -75% to
// -85%. The emulator counts 0.46x at the profiled shape.
//
// Limits: compute capability 9.0 exactly (sm_90a: wgmma); D = 64 and 128; fp16 and bf16; causal
// or not; any Sq, Skv >= 1; Q, K, V, O 16-byte aligned; B*H*Tr < 2^31 blocks. Not yet: the waits
// are synchronous (the tensor cores idle during the softmax, and the softmax waits for the
// tensor cores), every thread copies (cp.async; stage 07b: one thread and TMA), K_j and V_j are
// read by 64 query rows only (stage 07c: two consumer warpgroups share them, beside a producer
// warpgroup). The reasoning: book/chapters/stage_07a_wgmma.md.
// =================================================================================================
#include <cuda/pipeline>
#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::wgmma {
namespace {

// The per-thread pipeline of cp.async copies, exactly as in stage 06c: commit groups per thread,
// one __syncthreads() per tile to publish a stage and to free it for refill.
using Pipeline = cuda::pipeline<cuda::thread_scope_thread>;

//! [swizzle]
// Where chunk `c` (16 bytes = 8 elements) of row `r` of a (kRows, D) tile lives, in elements from
// the tile's start, in the layout the wgmma descriptors' 128-byte swizzle mode reads: stage 06c's
// XOR swizzle, cut into (kRows, 64) column blocks of 128-byte rows. Inside each 1024-byte atom of
// 8 rows, chunk c of a block's row r sits at chunk position c ^ (r % 8):
//
//      chunk position:   0    1    2    3    4    5    6    7
//      row 0             c0   c1   c2   c3   c4   c5   c6   c7
//      row 1             c1   c0   c3   c2   c5   c4   c7   c6
//      ...
//      row 7             c7   c6   c5   c4   c3   c2   c1   c0
//      row 8 = row 0, ...
//
// At D = 64 that is 06c's layout exactly; D = 128 is two column blocks, (rows, 0..63) and (rows,
// 64..127), one after the other (06c kept a row's 256 bytes together). The conflict analysis is
// 06c's: 8 threads copying the 8 chunks of a row, or 8 lanes storing one chunk of 8 rows, hit 8
// different 4-bank groups.
//
// SW128 by its address bits (PTX ISA, "Tensors: Swizzling Modes", the 128-byte mode; the
// descriptor's mode 1 is the same): in an atom aligned to 1024 bytes, the byte at linear offset a
// is stored at a ^ (((a >> 7) & 7) << 4). Bits 4-6 (which 16-byte chunk of a 128-byte line) are
// XORed with bits 7-9 (which line of the atom). Three key bits permute 2^3 = 8 chunks: the
// pattern is 8 x 16 = 128 bytes wide, and repeats after 8 lines, 1024 bytes. So it is the
// picture above only when a row is one line, 128 bytes = 64 fp16/bf16: hence the column blocks.
// 06c at D = 128 keys its XOR on r % 8, address bits 8-10 of its 256-byte rows; SW128 would key
// line 2r + h (h: the row's first or second half) on (2r + h) % 8, a different permutation.
template <int kRows>
__device__ __forceinline__ int swizzle(int r, int c) {
  return (c / 8) * kRows * 64 + r * 64 + ((c % 8) ^ (r % 8)) * 8;
}
//! [swizzle]

//! [load_tile_async]
// Issues the copy of rows [row0, row0 + kRows) of one head's (n_rows, D) matrix into a swizzled
// tile: kCopiers threads (numbered `tid`), one 16-byte cp.async per thread and step, consecutive
// threads on consecutive chunks of a row (coalesced in global memory, conflict-free in shared
// memory). Rows at or past n_rows — the ragged tail — are never read: the thread stores zeros
// instead (a stale NaN in V would survive the multiplication by a masked p = 0). As in stage 06c
// but for swizzle<kRows>: the tile's row count now says where its second column block starts.
template <int kD, int kRows, int kCopiers, class T>
__device__ __forceinline__ void load_tile_async(T* __restrict__ dst, const T* __restrict__ src,
                                                int row0, int n_rows, int tid, Pipeline& pipe) {
  constexpr int kPerRow = kD / 8;               // 16-byte chunks per row
  constexpr int kRowStep = kCopiers / kPerRow;  // rows the copiers cover per step
  constexpr int kSteps = kRows / kRowStep;
  static_assert(kCopiers % kPerRow == 0 && kRows % kRowStep == 0,
                "the copiers cover whole rows per step and the tile in whole steps");
  const int r0 = tid / kPerRow, c = tid % kPerRow;  // this thread: chunk c of rows r0 + k*kRowStep
  // One 64-bit address per call; the steps are constant offsets from it (immediates in SASS).
  const T* src_thread = src + (std::int64_t{row0} + r0) * kD + c * 8;
  const int rows_left = n_rows - row0 - r0;  // steps at or past this row count are zero-filled
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int r = r0 + step * kRowStep;
    T* chunk = dst + swizzle<kRows>(r, c);  // (8) dtype in smem
    if (step * kRowStep < rows_left) {
      cuda::memcpy_async(chunk, src_thread + step * kRowStep * kD, cuda::aligned_size_t<16>(16),
                         pipe);
    } else {
      *reinterpret_cast<uint4*>(chunk) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}
//! [load_tile_async]

//! [ownership]
// Who owns what. The block's one warpgroup owns the whole 64-row strip; wgmma's accumulator
// layout gives warp w rows 16w .. 16w + 15, and inside them, per n8 slice of columns, exactly the
// mma.m16n8k16 C layout of stage 06c: lane 4g + t (g = lane / 4, t = lane % 4) holds rows 16w + g
// and 16w + g + 8, columns 2t and 2t + 1. Element 4n + e of an accumulator array is row
// 16w + g + 8 (e / 2), column 8n + 2t + (e % 2):
//
//   S_ij, P_ij (64, Bc): Bc/8 n8 slices x 4 = Bc/2 fp32 registers per thread
//   O_i        (64, D):  D/8 n8 slices x 4  = D/2 fp32 registers per thread
//
// A row is still spread over the 4 lanes of a quad: its max and sum are two __shfl_xor_sync away.
// Shared between warps: Q_i (read by the warpgroup's wgmmas) and the K_j / V_j ring.
//! [ownership]

// clang-format off
//! [ring]
// The ring, kStages stages (tile j in stage j % kStages), as in stage 06c; Q_i has its own commit
// group ahead of the tiles' and is first waited for with tile 0:
//
//              stage 0         stage 1         stage 2
//   prologue   copy K_0, V_0   copy K_1, V_1   -               (Q_i: its own group, first)
//   tile 0     wgmma (0)       (landing)       copy K_2, V_2   <- after tile 0's barrier (A)
//   tile 1     copy K_3, V_3   wgmma (1)       (landing)       <- stage 0 is free: every thread
//   tile 2     (landing)       copy K_4, V_4   wgmma (2)          waited for tile 0's wgmmas
//! [ring]
// clang-format on

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocksPerSm)
    fused_attention_kernel(const T* __restrict__ q, const T* __restrict__ k,
                           const T* __restrict__ v, T* __restrict__ o, float* __restrict__ lse,
                           Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc;
  constexpr int kStages = Tile::Stages;
  constexpr int kSN = Tile::kSN, kON = Tile::kON;

  FS_DYNAMIC_SHARED(unsigned char, smem_raw);
  // Round the base up to 1024 bytes: swizzle atoms and the wgmma descriptors (base offset 0)
  // assume it. kSmemBytes includes the slack.
  unsigned char* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);  // (Br, D) dtype, swizzled: Q_i, then O_i / l
  // Stage s of the ring: K (Bc, D) dtype, then V (Bc, D) dtype, both swizzled.
  auto stage_k = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffRing + s * Tile::kStageBytes);
  };
  auto stage_v = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffRing + s * Tile::kStageBytes + Tile::kKVBytes);
  };

  // One block per (head, query block), the query blocks of a head adjacent in launch order (they
  // share K, V through L2); inside a head the last query block first (the longest under a causal
  // mask), as in stage 06c.
  const int i = sh.tr - 1 - static_cast<int>(blockIdx.x % static_cast<unsigned>(sh.tr));
  const std::int64_t bh = blockIdx.x / static_cast<unsigned>(sh.tr);  // b*H + h
  const int row0 = i * Br;                                            // first row of Q_i
  const T* q_head = q + bh * sh.sq * D;                               // (Sq, D) of this head
  const T* k_head = k + bh * sh.skv * D;                              // (Skv, D)
  const T* v_head = v + bh * sh.skv * D;                              // (Skv, D)

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warp_row0 = warp * Tile::kWarpRows;  // first row of this warp's accumulator rows
  const int g = lane / 4, t = lane % 4;  // groupID, threadID_in_group (see the ownership picture)
  // This thread's two rows: h = 0 is strip row g, h = 1 is strip row g + 8. Rows >= Sq (ragged
  // last block) are computed on zero-filled Q and never stored.
  const int my_row[2] = {row0 + warp_row0 + g, row0 + warp_row0 + g + 8};
  // Keys [0, kv_end) are visible to a row: the causal diagonal and Skv in one bound.
  const int kv_end[2] = {static_cast<int>(causal_kv_end(my_row[0], sh.sq, sh.skv, kCausal)),
                         static_cast<int>(causal_kv_end(my_row[1], sh.sq, sh.skv, kCausal))};

  // Tiles the block visits: 0 .. Tc_i-1, the last Tc_i - Tc_full of them masked (they cross the
  // causal diagonal or Skv), as in stage 06c.
  const int last_row = min(row0 + Br, sh.sq) - 1;
  const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, sh.skv, kCausal));
  const int Tc_i = (kv_stop + Bc - 1) / Bc;  // tiles visited; 0 when no row sees a key
  const int kv_full = static_cast<int>(causal_kv_end(row0, sh.sq, sh.skv, kCausal));
  const int Tc_full = kv_full / Bc;  // tiles 0 .. Tc_full-1 need no mask (<= Tc_i)

  //! [pipeline]
  Pipeline pipe = cuda::make_pipeline();
  // Issues this thread's copies of K_t and V_t into stage t % kStages and closes its commit group.
  // Past the last tile the group is empty but still committed, so that group counts stay fixed.
  auto prefetch = [&](int t_next) {
    if (t_next < Tc_i) {
      const int s = t_next % kStages;
      const int tid = static_cast<int>(threadIdx.x);
      load_tile_async<D, Bc, Tile::kThreads>(stage_k(s), k_head, t_next * Bc, sh.skv, tid, pipe);
      load_tile_async<D, Bc, Tile::kThreads>(stage_v(s), v_head, t_next * Bc, sh.skv, tid, pipe);
    }
    pipe.producer_commit();  // cp.async.commit_group
  };
  // Group 0: Q_i, copied by the whole warpgroup (its wgmmas read all of it). Groups 1 ..
  // kStages-1: tiles 0 .. kStages-2.
  load_tile_async<D, Br, Tile::kThreads>(sQ, q_head, row0, sh.sq, static_cast<int>(threadIdx.x),
                                         pipe);
  pipe.producer_commit();
#pragma unroll
  for (int tt = 0; tt < kStages - 1; ++tt)
    prefetch(tt);
  //! [pipeline]

  //! [descriptors]
  // wgmma matrix descriptors (ptx.cuh, wgmma_desc_sw128). All three operands are 128B-swizzled
  // column blocks of 64 columns; a 16-wide k step is 32 bytes along a row (K-major Q, K) or 16
  // rows = 2,048 bytes down the block (MN-major V).
  //   A = Q (64, D), K-major: column block kk / 4, + 32 B per k16 step inside it.
  //   B = K_j (Bc, D) read as K^T: "N x K, K-major" — no transpose: column block kk / 4, + 32 B.
  //   B = V_j (Bc, D) = (k, n) with n contiguous: MN-major (imm-tnsp-b = 1); k16 step kk starts
  //       at row 16 kk; the next 64 columns of n (D = 128) are the next column block: LBO.
  // The stride byte offset of all three is one atom (8 rows x 128 B): the next 8 rows of M or N
  // (Q, K) or of K (V).
  auto q_desc = [&](int kk) {  // k16 step kk of D
    return ptx::wgmma_desc_sw128(
        ptx::smem_addr(sQ) +
            static_cast<std::uint32_t>((kk / 4) * Tile::kQBlockBytes + (kk % 4) * 32),
        16, Tile::kAtomBytes);
  };
  auto k_desc = [&](int s, int kk) {
    return ptx::wgmma_desc_sw128(
        ptx::smem_addr(stage_k(s)) +
            static_cast<std::uint32_t>((kk / 4) * Tile::kKVBlockBytes + (kk % 4) * 32),
        16, Tile::kAtomBytes);
  };
  auto v_desc = [&](int s, int kk) {  // keys 16 kk .. 16 kk + 15, all D columns
    return ptx::wgmma_desc_sw128(
        ptx::smem_addr(stage_v(s)) + static_cast<std::uint32_t>(kk * 16 * Tile::kSwizzleBytes),
        static_cast<std::uint32_t>(Tile::kKVBlockBytes), Tile::kAtomBytes);
  };
  //! [descriptors]

  // Per thread, in the wgmma accumulator layout (the ownership picture).
  float o_acc[Tile::kORegs];  // (64, D) fp32 O_i strip: D/8 n8 slices x 4
#pragma unroll
  for (int e = 0; e < Tile::kORegs; ++e)
    o_acc[e] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max of rows g, g+8 (the quad agrees)
  float l_run[2] = {0.0f, 0.0f};  // this lane's share of the running sums (quad-reduced at the end)

  // One tile: wait for it, refill the stage the last tile left, S = Q K^T, the online softmax,
  // O = alpha O + P V. `masked` is std::true_type for the tiles that cross the diagonal or Skv:
  // compile-time, so the wgmma sequence of a tile has no run-time branch.
  auto tile_step = [&](int j, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int kv0 = j * Bc;  // first key of K_j, V_j
    const int s = j % kStages;

    //! [wait]
    // This thread's copies of tile j (and of Q_i) have landed: group j + 1; only the kStages - 2
    // newest may still fly. They were written through the generic proxy (cp.async and, for rows
    // past Skv or Sq, ordinary stores); wgmma reads shared memory through the async proxy, which
    // is not guaranteed to see them without a fence.proxy.async (PTX ISA, "Async Proxy" of the
    // warpgroup MMA chapter, and fence.proxy.async): each thread fences its own writes, then
    // barrier (A) makes every thread's fenced writes visible to the whole warpgroup — and tells
    // that every thread has waited for tile j-1's wgmmas (wait_group<0> below), whose stage
    // (j-1) % kStages is refilled right after it. It is the kernel's only block-wide barrier.
    cuda::pipeline_consumer_wait_prior<kStages - 2>(pipe);
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    __syncthreads();
    prefetch(j + kStages - 1);
    //! [wait]

    //! [wgmma]
    float s_acc[Tile::kSRegs];  // (64, Bc) fp32 S_ij strip: Bc/8 n8 slices x 4
    // wgmma.fence orders registers, not shared memory (ptx.cuh, "wgmma.fence"): S's accumulator
    // registers were last read by ordinary instructions (the previous tile's softmax and packing
    // of P), and tile 0's S is the warpgroup's first wgmma; either needs the fence. O is not an
    // operand here. Q_i and K_j in shared memory were ordered by fence.proxy.async and (A) above.
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tile::kQK; ++kk)  // S = Q K^T: D/16 x m64n128k16, the first S = 0 + ..
      ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
    ptx::wgmma_commit_group();
    // Synchronous: S_ij is complete before anything reads it (nothing overlaps the softmax).
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(s_acc);
    //! [wgmma]

    if constexpr (kMasked) {
      // Columns a row does not see (past its causal diagonal, or >= Skv: K's zero-filled rows)
      // become -inf and contribute exp2(-inf) = 0: P = 0 there, so V's zero rows (or any row)
      // are multiplied by 0.
#pragma unroll
      for (int n = 0; n < kSN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (kv0 + 8 * n + 2 * t + (e % 2) >= kv_end[e / 2]) s_acc[4 * n + e] = -INFINITY;
    }

    //! [online_softmax]
    // Stage 06c's softmax on the wgmma accumulator: a row lives in the 4 lanes of a quad.
    float alpha[2];  // O_i and l of row h are rescaled by alpha[h] = exp2(tau2 * (m_old - m_new))
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m_run[h];
#pragma unroll
      for (int n = 0; n < kSN; ++n)
        mx = fmaxf(mx, fmaxf(s_acc[4 * n + 2 * h], s_acc[4 * n + 2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));  // the quad's 4 lanes hold one row:
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));  // after two steps all 4 agree
      // -inf guard: a row with no visible key yet keeps mx = -inf; subtracting 0 instead keeps
      // NaN out (alpha and every p are exp2(-inf) = 0).
      const float m_scaled = (mx == -INFINITY ? 0.0f : mx) * sh.scale_log2;
      alpha[h] = ptx::ex2_approx_ftz(m_run[h] * sh.scale_log2 - m_scaled);  // 0 while m_run = -inf
      m_run[h] = mx;
      float row_sum = 0.0f;  // this lane's part of the row: Bc/4 of its columns
#pragma unroll
      for (int n = 0; n < kSN; ++n) {
        // p = exp2(tau2 s - tau2 m): scale and log2(e) folded into one FFMA
        s_acc[4 * n + 2 * h] =
            ptx::ex2_approx_ftz(fmaf(s_acc[4 * n + 2 * h], sh.scale_log2, -m_scaled));
        s_acc[4 * n + 2 * h + 1] =
            ptx::ex2_approx_ftz(fmaf(s_acc[4 * n + 2 * h + 1], sh.scale_log2, -m_scaled));
        row_sum += s_acc[4 * n + 2 * h] + s_acc[4 * n + 2 * h + 1];
      }
      l_run[h] = alpha[h] * l_run[h] + row_sum;
    }
#pragma unroll
    for (int n = 0; n < kON; ++n) {  // O_i = alpha O_i, in registers; P_ij V_j is added next
      o_acc[4 * n + 0] *= alpha[0];
      o_acc[4 * n + 1] *= alpha[0];
      o_acc[4 * n + 2] *= alpha[1];
      o_acc[4 * n + 3] *= alpha[1];
    }
    //! [online_softmax]

    //! [p_in_registers]
    // The S accumulator's n8 slices 2kk, 2kk+1 hold exactly the register A operand of k16 step
    // kk (per warp, the mma.m16n8k16 A fragment of stage 06c): rounded to the dtype and packed in
    // pairs, no data crosses lanes.
    std::uint32_t p_frag[Tile::kPV][4];  // (64, Bc) dtype P strip: Bc/16 register A operands
#pragma unroll
    for (int kk = 0; kk < Tile::kPV; ++kk) {
      p_frag[kk][0] = pack2<T>(s_acc[8 * kk + 0], s_acc[8 * kk + 1]);  // row g, keys 2t..
      p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);  // row g + 8
      p_frag[kk][2] = pack2<T>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);  // row g, keys 8+2t..
      p_frag[kk][3] = pack2<T>(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);  // row g + 8
    }
    //! [p_in_registers]

    //! [pv]
    // O_i (64, D) += P_ij (64, Bc) V_j (Bc, D). The fence orders the rescale of O and the packing
    // of P (ordinary register writes) before the wgmmas that read them.
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tile::kPV; ++kk) {  // Bc/16 x m64n{D}k16
      if constexpr (D == 64) {
        ptx::wgmma_m64n64k16_rs<T>(o_acc, p_frag[kk], v_desc(s, kk), 1);
      } else {
        ptx::wgmma_m64n128k16_rs<T>(o_acc, p_frag[kk], v_desc(s, kk), 1);
      }
    }
    ptx::wgmma_commit_group();
    // Synchronous again: O is complete, and P's registers and stage s are free, when this returns.
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o_acc);
    ptx::wgmma_fence_operand(p_frag);
    // No barrier after the tile: the next tile's (A) frees this stage.
    //! [pv]
  };

  for (int j = 0; j < Tc_full; ++j)
    tile_step(j, std::false_type{});
  for (int j = Tc_full; j < Tc_i; ++j)
    tile_step(j, std::true_type{});

  //! [epilogue]
  // Only empty groups remain in flight here — or, for a block that visits no tile, Q_i's: the
  // wait drains them, so that no copy outlives the block, and the barrier tells every warp that
  // all copies into the Q region (each warp's rows were copied by other warps too) have landed
  // before the staging stores below overwrite it. The wgmmas that read Q have completed
  // (wait_group<0>), and their completion orders the async proxy's reads before these stores.
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncthreads();
  float inv_l[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(kFullMask, l, 1);  // the quad's shares of the row's l, in a fixed
    l += __shfl_xor_sync(kFullMask, l, 2);  // order: every lane gets the same bits
    // O = O_i / l; LSE = ln(2) (tau2 m + log2 l). A row that saw no key has l = 0: O = 0,
    // LSE = -inf (never 0/0).
    inv_l[h] = l > 0.0f ? 1.0f / l : 0.0f;
    if (t == 0 && my_row[h] < sh.sq) {
      lse[bh * sh.sq + my_row[h]] =
          l > 0.0f ? kLn2 * fmaf(m_run[h], sh.scale_log2, log2f(l)) : -INFINITY;
    }
  }
  // Stage the warp's 16 rows of O / l in its rows of the Q region, swizzled: a 4-byte store per
  // accumulator pair; for each n8 slice the warp writes 8 rows x 4 lanes at one chunk position
  // -> a column of the swizzle picture, 32 distinct banks.
  T* sO = sQ;  // (Br, D) dtype, swizzled: O_i / l; this warp writes and reads its own rows only
#pragma unroll
  for (int n = 0; n < kON; ++n) {
    *reinterpret_cast<std::uint32_t*>(sO + swizzle<Br>(warp_row0 + g, n) + 2 * t) =
        pack2<T>(o_acc[4 * n + 0] * inv_l[0], o_acc[4 * n + 1] * inv_l[0]);
    *reinterpret_cast<std::uint32_t*>(sO + swizzle<Br>(warp_row0 + g + 8, n) + 2 * t) =
        pack2<T>(o_acc[4 * n + 2] * inv_l[1], o_acc[4 * n + 3] * inv_l[1]);
  }
  // (E) The staged strip is visible to all of the warp's lanes (only this warp reads it).
  __syncwarp();
  // 16-byte stores, a whole row per D/8 consecutive lanes (coalesced), 8 lanes per 128-byte
  // piece of a row: a row of the swizzle picture, 32 distinct banks.
  constexpr int kPerRow = Tile::kChunks;
#pragma unroll
  for (int step = 0; step < Tile::kWarpRows * kPerRow / 32; ++step) {
    const int idx = step * 32 + lane;
    const int r = warp_row0 + idx / kPerRow, c = idx % kPerRow;  // tile row, chunk of the row
    const uint4 piece = *reinterpret_cast<const uint4*>(sO + swizzle<Br>(r, c));  // (8) dtype
    const int out_row = row0 + r;
    if (out_row < sh.sq)  // ragged last block: rows past Sq were computed, never stored
      *reinterpret_cast<uint4*>(o + (bh * sh.sq + out_row) * D + c * 8) = piece;
  }
  //! [epilogue]
}

}  // namespace

FS_DEFINE_KERNEL_OF(fused_attention_kernel<T, Tile, kCausal>)
FS_EXPORT_KERNELS(TileD64)
FS_EXPORT_KERNELS(TileD128)

}  // namespace flashsteps::wgmma
