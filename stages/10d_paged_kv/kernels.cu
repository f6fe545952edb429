// =================================================================================================
// Stage 10d — a paged KV cache: K and V read through the block table, page by page.
//
// What changed since stage 10b (its parent), and nothing else:
//  * K and V are a pool of pages [P, H_kv, page_size, D] (problem.hpp): key j of sequence b is row
//    j % page_size of page block_table[b][j / page_size], and K/V head h_kv of a page starts
//    h_kv * page_size rows into it. Each key tile's rows are gathered by cp.async from the pages
//    that hold them (load_kv_tile_async): a thread finds the page of its first row once per tile
//    and walks on page by page, one table entry per 16-byte copy, no division in the loop.
//  * The page sizes it takes are multiples of 16 (kPageMultiple): the 128 copiers cover 16 rows
//    per step at D = 64 and 8 at D = 128, so a thread's next row is at most one page boundary
//    away (the walk's one compare and subtract), and every step of the block reads rows of one
//    page. A page may be shorter than a key tile (16, 32) or span several (256): the walk does
//    not care. A contiguous cache is the pool of B pages of Skv keys, page b for sequence b: one
//    code path reads both.
// Everything else — the ring, mma.sync + ldmatrix, S, P, O and Q in registers, the K/V head of a
// query head, the lengths, the splits and their combine — is 10b's.
//
//! [prediction_step]
// Which metric should move, and by how much (written before measuring, before any GPU ran it).
// The measure is 10b's: the bytes that must move over the latency, against the copy bandwidth.
//  * Contiguous caches (every shape 10b is measured at): the same copies from the same addresses;
//    a thread adds a compare, a subtract and a select per 16-byte copy and one division per tile:
//    0.95-1.05x of 10b's latency. Registers: 10b's range plus the walk's page and row, 204-255,
//    no spill.
//  * Decode through pages of 16 keys (vLLM's default block size), B = 8, H 32 / H_kv 8, 8k keys,
//    D = 128: each page is 16 x 256 = 4 KiB of one K/V head, whole 128-byte lines, so DRAM sees
//    the same sectors as the contiguous cache; the table adds 4 bytes per 16 keys (0.1% of the
//    bytes) from L1. 0.9-1.05x of the contiguous cache's latency in the same run.
//! [prediction_step]
//
// Limits: 10b's (D = 64 and 128, fp16 and bf16, causal or not, any Sq, Skv >= 1, sm_80+, Q, K,
// V, O 16-byte aligned, H a multiple of H_kv, lengths in [0, Skv], at most 128 splits), and page
// sizes that are multiples of 16. Not yet: a block still reads its K/V head for one query head
// (10c packs a group's query heads). The reasoning: book/chapters/stage_10d_paged_kv.md.
// =================================================================================================
#include <cuda/pipeline>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::paged_kv {
namespace {

// The per-thread pipeline of cp.async copies, exactly as in stage 04 (see its comment): commit
// groups per thread, one __syncthreads() per tile to publish a stage and to free it for refill.
using Pipeline = cuda::pipeline<cuda::thread_scope_thread>;

//! [swizzle]
// Where chunk `c` (16 bytes = 8 elements) of row `r` of a swizzled tile lives, in elements from
// the tile's start. Rows are unpadded (D * 2 = 128 or 256 bytes, a multiple of the 128 bytes that
// the 32 banks span), so the 16-byte position p of a chunk inside its 128-byte piece picks its
// 4-bank group (banks 4p .. 4p+3). The swizzle stores chunk c at position c ^ (r % 8):
//
//      position p in the row:  0    1    2    3    4    5    6    7    (+8.. for D = 128: same)
//      row 0                   c0   c1   c2   c3   c4   c5   c6   c7
//      row 1                   c1   c0   c3   c2   c5   c4   c7   c6
//      row 2                   c2   c3   c0   c1   c6   c7   c4   c5
//      row 3                   c3   c2   c1   c0   c7   c6   c5   c4
//      row 4                   c4   c5   c6   c7   c0   c1   c2   c3
//      row 5                   c5   c4   c7   c6   c1   c0   c3   c2
//      row 6                   c6   c7   c4   c5   c2   c3   c0   c1
//      row 7                   c7   c6   c5   c4   c3   c2   c1   c0
//      row 8 = row 0, ...      (an XOR with r % 8 < 8 never leaves the 128-byte piece)
//
// Reads: an ldmatrix phase serves one 8x8 matrix: 8 lanes give 8 consecutive rows at the same
// logical chunk c — positions c^0 .. c^7, a column of the picture: 8 different 4-bank groups, all
// 32 banks once. Without the swizzle all 8 would sit in one group: an 8-way conflict.
// Writes: 8 consecutive threads of a cp.async (or the epilogue's staging read) take the 8 chunks
// of one 128-byte piece of a row — a row of the picture: again 8 different groups. The same
// layout serves both directions, so bank conflicts should measure zero for every shared-memory
// access of this kernel (the staging *stores* of the epilogue are 4-byte, 8 rows x 4 lanes at one
// chunk: a column again).
// At D = 64 (128-byte rows) this is, byte for byte, TMA's and wgmma's 128-byte swizzle (SW128),
// which XORs address bits 4-6 with bits 7-9 (PTX ISA, "Tensors: Swizzling Modes"). At D = 128 it
// is not: a row is 256 bytes, so r % 8 sits in address bits 8-10, while SW128 would XOR with the
// 128-byte line index, bits 7-9 (the row's half, then r % 4). Stage 07a cuts rows at 64 columns.
template <int kD>
__device__ __forceinline__ int swizzle(int r, int c) {
  return r * kD + ((c ^ (r % 8)) * 8);
}
//! [swizzle]

//! [load_tile_async]
// Issues the copy of rows [row0, row0 + kRows) of one head's (n_rows, D) matrix into a swizzled
// tile: kCopiers threads (numbered `tid`), one 16-byte cp.async per thread and step, consecutive
// threads on consecutive chunks of a row (coalesced in global memory, conflict-free in shared
// memory). Rows at or past n_rows — the ragged tail — are never read: the thread stores zeros
// instead (a stale NaN in V would survive the multiplication by a masked p = 0).
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
    T* chunk = dst + swizzle<kD>(r, c);  // (8) dtype in smem
    if (step * kRowStep < rows_left) {
      cuda::memcpy_async(chunk, src_thread + step * kRowStep * kD, cuda::aligned_size_t<16>(16),
                         pipe);
    } else {
      *reinterpret_cast<uint4*>(chunk) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}
//! [load_tile_async]

//! [pages]
// New: where a sequence's keys live. K (and V) is a pool of pages [P, H_kv, page_size, D]; key j
// of the sequence is row j % size of page of(j / size), and one page is `stride` elements long
// (H_kv * size * D). Without a block table the contiguous cache [B, H_kv, Skv, D] is that pool
// with pages of Skv keys, sequence b's page being b: `table` is null and of() returns `first`.
struct Pages {
  const std::int32_t* table;  // this sequence's row of the block table, or null: contiguous
  std::int64_t first;         // without a table, the sequence's one page
  std::int64_t stride;        // elements from a page to the next
  int size;                   // keys per page
  __device__ __forceinline__ std::int64_t of(int i) const {
    return table != nullptr ? std::int64_t{table[i]} : first;
  }
};
//! [pages]

// load_tile_async for a key tile: rows [row0, row0 + kRows) of the sequence's keys, gathered from
// their pages. `head` is this K/V head's rows in page 0 (page p's are p * pages.stride further).
// The copiers take the same rows and chunks as load_tile_async; only a row's address differs.
template <int kD, int kRows, int kCopiers, class T>
__device__ __forceinline__ void load_kv_tile_async(T* __restrict__ dst, const T* __restrict__ head,
                                                   const Pages& pages, int row0, int n_rows,
                                                   int tid, Pipeline& pipe) {
  constexpr int kPerRow = kD / 8;               // 16-byte chunks per row
  constexpr int kRowStep = kCopiers / kPerRow;  // rows the copiers cover per step
  constexpr int kSteps = kRows / kRowStep;
  static_assert(kRowStep <= kPageMultiple,
                "a step moves a thread's row at most one page on (the walk below)");
  const int r0 = tid / kPerRow, c = tid % kPerRow;  // this thread: chunk c of rows r0 + k*kRowStep
  const int rows_left = n_rows - row0 - r0;  // steps at or past this row count are zero-filled
  //! [page_walk]
  // This thread's first key, j = row0 + r0: page j / size, row j % size of it. One division per
  // tile; the steps walk on, kRowStep keys each, into the next page when they pass the end of
  // this one (kRowStep <= 16 <= size: never two pages at once).
  int page = (row0 + r0) / pages.size;
  int in_page = (row0 + r0) % pages.size;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    T* chunk = dst + swizzle<kD>(r0 + step * kRowStep, c);  // (8) dtype in smem
    if (step * kRowStep < rows_left) {
      const T* src = head + pages.of(page) * pages.stride + std::int64_t{in_page} * kD + c * 8;
      cuda::memcpy_async(chunk, src, cuda::aligned_size_t<16>(16), pipe);
    } else {
      *reinterpret_cast<uint4*>(chunk) = make_uint4(0u, 0u, 0u, 0u);
    }
    in_page += kRowStep;
    if (in_page >= pages.size) {
      in_page -= pages.size;
      ++page;
    }
  }
  //! [page_walk]
}

//! [ownership]
// Who owns what. Each of the 4 warps owns a 16-row strip of the query block for the whole kernel,
// as in stage 04 — but now the strip lives in the warp's registers, spread over its lanes in the
// mma.m16n8k16 layouts. Lane 4g + t (g = lane / 4 = "groupID", t = lane % 4) holds, of every
// n8-wide accumulator tile, rows g and g + 8, columns 2t and 2t + 1:
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
// hold their O elements. Nothing is shared between warps but the K_j / V_j ring.
//! [ownership]

//! [ring]
// The ring, kStages = 2, unchanged from stage 04 (tile j in stage j % 2). Q_i now has its own
// commit group, ahead of tile 0's, so that its fragments can be loaded while K_0, V_0 still fly:
//
//              stage 0            stage 1
//   prologue   copy K_0, V_0      -                    (Q_i: its own group, before them)
//   tile 0     math (K_0, V_0)    copy K_1, V_1        <- issued right after barrier (A) of tile 0
//   tile 1     copy K_2, V_2      math (K_1, V_1)      <- stage 0 is free: (A) of tile 1 saw every
//   tile 2     math (K_2, V_2)    copy K_3, V_3           warp finish tile 0
//! [ring]

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocksPerSm)
    fused_attention_kernel(const T* __restrict__ q, const T* __restrict__ k,
                           const T* __restrict__ v, T* __restrict__ o, float* __restrict__ lse,
                           const std::int32_t* __restrict__ cache_seqlens,
                           const std::int32_t* __restrict__ block_table, float* __restrict__ o_part,
                           float* __restrict__ lse_part, Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc;
  constexpr int kStages = Tile::Stages;
  constexpr int kQK = Tile::kQK, kSN = Tile::kSN, kPK = Tile::kPK, kON = Tile::kON;

  FS_DYNAMIC_SHARED(__align__(1024) unsigned char, smem);
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);  // (Br, D) dtype, swizzled: Q_i, then O_i / l
  // Stage s of the ring: K (Bc, D) dtype, then V (Bc, D) dtype, both swizzled.
  auto stage_k = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffRing + s * Tile::kStageBytes);
  };
  auto stage_v = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffRing + s * Tile::kStageBytes + Tile::kKVBytes);
  };

  // One block per (head, query block), the query blocks of a head adjacent in launch order so
  // that they share K_j, V_j through L2 (stage 04). New: inside a head the last query block goes
  // first — under a causal mask it has the most tiles, and starting the longest blocks first
  // shortens the tail of the grid.
  const int i = sh.tr - 1 - static_cast<int>(blockIdx.x % static_cast<unsigned>(sh.tr));
  const std::int64_t bh = blockIdx.x / static_cast<unsigned>(sh.tr);  // b*H + h
  const int row0 = i * Br;                                            // first row of Q_i
  const T* q_head = q + bh * sh.sq * D;                               // (Sq, D) of this head
  //! [kv_head]
  // The K/V head of query head h = bh % H of sequence b = bh / H is h / (H / H_kv), and the
  // sequence holds kv_len keys of the Skv its cache has room for.
  const std::int64_t b = bh / sh.heads;
  const int kv_heads = sh.heads / sh.group;
  const int kv_len = cache_seqlens != nullptr ? cache_seqlens[b] : sh.skv;
  //! [kv_head]
  //! [page_of_sequence]
  // New: the keys are in pages (Pages, above): sequence b's row of the block table, pages of
  // H_kv * page_size rows, and this K/V head's rows start (h / group) * page_size rows into each.
  const Pages pages{block_table != nullptr ? block_table + b * sh.pages_per_seq : nullptr, b,
                    std::int64_t{kv_heads} * sh.page_size * D, sh.page_size};
  const std::int64_t kv_in_page = std::int64_t{(bh % sh.heads) / sh.group} * sh.page_size * D;
  const T* k_head = k + kv_in_page;  // this K/V head's rows of page 0; of page p: + p * stride
  const T* v_head = v + kv_in_page;
  //! [page_of_sequence]

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warp_row0 = warp * Tile::kWarpRows;  // first row of this warp's strip in the tile
  const int g = lane / 4, t = lane % 4;  // groupID, threadID_in_group (see the ownership picture)
  // This thread's two rows: h = 0 is strip row g, h = 1 is strip row g + 8. Rows >= Sq (ragged
  // last block) are computed on zero-filled Q and never stored.
  const int my_row[2] = {row0 + warp_row0 + g, row0 + warp_row0 + g + 8};
  // Keys [0, kv_end) are visible to a row: the causal diagonal, aligned to the sequence's length,
  // and that length in one bound.
  const int kv_end[2] = {static_cast<int>(causal_kv_end(my_row[0], sh.sq, kv_len, kCausal)),
                         static_cast<int>(causal_kv_end(my_row[1], sh.sq, kv_len, kCausal))};

  // The block's last row sees the most keys and its first row the fewest (the mask is monotone
  // in the row). Tiles past the last row's last visible key are masked for every row: skipped.
  // Tiles inside the first row's visible keys are masked for no row: they take the unmasked path.
  // Only the tiles in between (the diagonal band, the ragged end of the keys) pay for the mask.
  const int last_row = min(row0 + Br, sh.sq) - 1;
  const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, kv_len, kCausal));
  const int Tc_i = (kv_stop + Bc - 1) / Bc;  // tiles visited; 0 when no row sees a key
  const int kv_full = static_cast<int>(causal_kv_end(row0, sh.sq, kv_len, kCausal));
  const int Tc_full = kv_full / Bc;  // tiles 0 .. Tc_full-1 need no mask (<= Tc_i)
  //! [split_range]
  // New: this block's split of the key tiles, split s = blockIdx.y of the launch's splits, cut to
  // the tiles its rows see: [t_begin, t_end), empty when the sequence ends before it. One split
  // reads tiles [0, Tc_i), as 10a.
  const int split = static_cast<int>(blockIdx.y);
  const int t_begin = min(split * sh.split_tiles, Tc_i);
  const int t_end = min(t_begin + sh.split_tiles, Tc_i);
  //! [split_range]

  //! [pipeline]
  Pipeline pipe = cuda::make_pipeline();
  // Issues this thread's copies of K_t and V_t into stage t % kStages and closes its commit group.
  // Past the last tile the group is empty but still committed, so that group counts stay fixed.
  auto prefetch = [&](int t_next) {
    if (t_next < t_end) {
      const int s = t_next % kStages;
      const int tid = static_cast<int>(threadIdx.x);
      load_kv_tile_async<D, Bc, Tile::kThreads>(stage_k(s), k_head, pages, t_next * Bc, kv_len, tid,
                                                pipe);
      load_kv_tile_async<D, Bc, Tile::kThreads>(stage_v(s), v_head, pages, t_next * Bc, kv_len, tid,
                                                pipe);
    }
    pipe.producer_commit();  // cp.async.commit_group
  };
  //! [pipeline]

  //! [load_q]
  // Group 0: each warp copies its own Q strip (16, D) — only this warp reads it, so its lanes
  // need each other's copies, never another warp's: __syncwarp() publishes them, no block-wide
  // barrier. Groups 1 .. kStages-1: tiles 0 .. kStages-2.
  load_tile_async<D, Tile::kWarpRows, 32>(sQ + warp_row0 * D, q_head, row0 + warp_row0, sh.sq, lane,
                                          pipe);
  pipe.producer_commit();
#pragma unroll
  for (int tt = 0; tt < kStages - 1; ++tt)
    prefetch(t_begin + tt);
  // Q's group is the oldest; the kStages - 1 tile groups behind it may still fly.
  cuda::pipeline_consumer_wait_prior<kStages - 1>(pipe);
  __syncwarp();
  // The warp's Q strip as kQK A fragments, kept in registers for the whole kernel. x4 matrices:
  // rows 0-7 / 8-15 x columns 16kk..+7 / +8..+15 -> a0, a1, a2, a3, so lane l points at strip
  // row l % 16, chunk 2kk + l / 16.
  std::uint32_t q_frag[kQK][4];  // (16, D) dtype of Q_i: D/16 A fragments (16, 16), 4 regs each
#pragma unroll
  for (int kk = 0; kk < kQK; ++kk) {
    ptx::ldmatrix_x4(q_frag[kk],
                     ptx::smem_addr(sQ + swizzle<D>(warp_row0 + lane % 16, 2 * kk + lane / 16)));
  }
  //! [load_q]

  float o_acc[kON][4];  // (16, D) fp32 O_i strip: D/8 accumulator tiles (16, 8), 4 regs each
#pragma unroll
  for (int n = 0; n < kON; ++n)
    o_acc[n][0] = o_acc[n][1] = o_acc[n][2] = o_acc[n][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max of rows g, g+8 (the quad agrees)
  float l_run[2] = {0.0f, 0.0f};  // this lane's share of the running sums (quad-reduced at the end)

  // Per-lane ldmatrix byte offsets inside a stage, before the kk / np / dp terms:
  //  K (x4, no trans): matrices = (keys 0-7, k 0-7), (keys 0-7, k 8-15), (keys 8-15, k 0-7),
  //    (keys 8-15, k 8-15) -> b0, b1 of n8 tile 2np and b0, b1 of tile 2np+1: lane l points at
  //    key row l % 8 + 8 * (l / 16), chunk 2kk + (l / 8) % 2.
  //  V (x4.trans): matrices = (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15),
  //    (keys 8-15, d 8-15), transposed -> b0, b1 of n8 tile 2dp and of tile 2dp+1: lane l points
  //    at key row l % 16, chunk 2dp + l / 16.
  // Every such row is 8 * (something) + l % 8, so its swizzle key (row % 8) is l % 8 for all of
  // them: the swizzled position of chunk 2c + b is (2c + b) ^ (l % 8) = 2c ^ (b ^ l % 8), and in
  // bytes (x 16) 32c ^ 16 (b ^ l % 8). The lane's offset for c = 0 carries the row and the XOR
  // key; step c only flips bits 5-6 (c % 4) and adds whole 128-byte pieces (c / 4) — see
  // chunk_pair() — so the compiler keeps 4 offsets per operand in registers instead of one per
  // (kk, np) pair (64 registers, and spills, when it hoisted them all).
  const std::uint32_t k_lane = static_cast<std::uint32_t>((lane % 8 + 8 * (lane / 16)) * D * 2 +
                                                          16 * (((lane / 8) % 2) ^ (lane % 8)));
  const std::uint32_t v_lane =
      static_cast<std::uint32_t>((lane % 16) * D * 2 + 16 * ((lane / 16) ^ (lane % 8)));
  // Byte offset of chunk pair c (chunks 2c, 2c+1) for a lane whose offset at c = 0 is `lane_off`.
  // Valid because tiles start on 1024-byte boundaries and rows are multiples of 128 bytes, so bits
  // 4-6 of the offset are exactly the chunk's position inside its 128-byte piece.
  auto chunk_pair = [](std::uint32_t lane_off, int c) {
    return (lane_off ^ (32u * static_cast<std::uint32_t>(c % 4))) +
           128u * static_cast<std::uint32_t>(c / 4);
  };

  // One tile: wait for it, refill the stage the last tile left, S = Q K^T, the online softmax,
  // O = alpha O + P V. `masked` is std::true_type for the tiles that cross the diagonal or Skv.
  auto tile_step = [&](int j, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int kv0 = j * Bc;  // first key of K_j, V_j
    const int s = j % kStages;
    const std::uint32_t sK = ptx::smem_addr(stage_k(s));  // (Bc, D) dtype: K_j
    const std::uint32_t sV = ptx::smem_addr(stage_v(s));  // (Bc, D) dtype: V_j

    //! [wait]
    // This thread's copies of tile j have landed (group j + 1; only the kStages - 2 newest may
    // still fly). (A) then makes every thread's pieces visible to every warp, and tells that every
    // warp has finished tile j-1's ldmatrix reads of stage (j-1) % kStages, which is refilled
    // right below. It is the kernel's only block-wide barrier.
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
        ptx::ldmatrix_x4(kb, sK + 16u * np * D * 2 + chunk_pair(k_lane, kk));
        ptx::mma_m16n8k16<T>(s_acc[2 * np], q_frag[kk], {kb[0], kb[1]});
        ptx::mma_m16n8k16<T>(s_acc[2 * np + 1], q_frag[kk], {kb[2], kb[3]});
      }
    }
    if constexpr (kMasked) {
      // Element e of tile n is column kv0 + 8n + 2t + (e % 2) of row h = e / 2. A column the row
      // does not see (past its causal diagonal, or past kv_len: K's zero-filled rows) becomes -inf,
      // and contributes exp2(-inf) = 0 below.
#pragma unroll
      for (int n = 0; n < kSN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (kv0 + 8 * n + 2 * t + (e % 2) >= kv_end[e / 2]) s_acc[n][e] = -INFINITY;
    }
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
      // exp2(-inf - -inf) = NaN out: alpha and every p are then exp2(-inf) = 0. (Only a masked
      // tile can leave a row without a key, but the select is two instructions per tile.)
      const float m_scaled = (mx == -INFINITY ? 0.0f : mx) * sh.scale_log2;
      alpha[h] = ptx::ex2_approx_ftz(m_run[h] * sh.scale_log2 - m_scaled);  // 0 while m_run = -inf
      m_run[h] = mx;
      float row_sum = 0.0f;  // this lane's part of the row: Bc/4 of its columns
#pragma unroll
      for (int n = 0; n < kSN; ++n) {
        // p = exp2(tau2 * s - tau2 * m): the scale and log2(e) are folded into one FMA
        s_acc[n][2 * h] = ptx::ex2_approx_ftz(fmaf(s_acc[n][2 * h], sh.scale_log2, -m_scaled));
        s_acc[n][2 * h + 1] =
            ptx::ex2_approx_ftz(fmaf(s_acc[n][2 * h + 1], sh.scale_log2, -m_scaled));
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
        ptx::ldmatrix_x4_trans(vb, sV + 16u * kk * D * 2 + chunk_pair(v_lane, dp));
        ptx::mma_m16n8k16<T>(o_acc[2 * dp], p_frag, {vb[0], vb[1]});
        ptx::mma_m16n8k16<T>(o_acc[2 * dp + 1], p_frag, {vb[2], vb[3]});
      }
    }
    // No barrier after the tile: the next tile's (A) frees this stage.
    //! [pv]
  };

  // The split's tiles: those before Tc_full without the mask, the rest with it.
  for (int j = t_begin; j < min(t_end, Tc_full); ++j)
    tile_step(j, std::false_type{});
  for (int j = max(t_begin, Tc_full); j < t_end; ++j)
    tile_step(j, std::true_type{});

  //! [epilogue]
  // Only empty groups remain in flight here (and Q's copies are complete: the wait before the Q
  // fragments covered them). The wait drains the empty ones, so that no copy outlives the block;
  // the __syncwarp() orders every lane's Q fragment reads before the staging writes below, which
  // reuse the warp's own Q rows.
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncwarp();
  // New: with several splits the LSE is split s's, in its rows of the workspace.
  float* const lse_out = o_part != nullptr ? lse_part + split * (sh.bh * sh.sq) : lse;
  float inv_l[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(kFullMask, l, 1);  // the quad's shares of the row's l, in a fixed
    l += __shfl_xor_sync(kFullMask, l, 2);  // order: every lane gets the same bits
    // O = O_i / l; LSE = tau * m + ln(l) = ln(2) * (tau2 * m + log2(l)). A row that saw no key
    // has l = 0: O = 0, LSE = -inf (never 0/0).
    inv_l[h] = l > 0.0f ? 1.0f / l : 0.0f;
    if (t == 0 && my_row[h] < sh.sq) {
      lse_out[bh * sh.sq + my_row[h]] =
          l > 0.0f ? kLn2 * fmaf(m_run[h], sh.scale_log2, log2f(l)) : -INFINITY;
    }
  }
  //! [partial]
  // New: with several splits, this split's O / l goes to its rows of the workspace in fp32, 8 bytes
  // per accumulator pair (the combine reads it once); its LSE went above. A row that saw no key of
  // this split has l = 0: O = 0 and LSE = -inf, which the combine weighs 0.
  if (o_part != nullptr) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (my_row[h] >= sh.sq) continue;
      float* dst = o_part + ((split * sh.bh + bh) * sh.sq + my_row[h]) * D + 2 * t;
#pragma unroll
      for (int n = 0; n < kON; ++n)
        *reinterpret_cast<float2*>(dst + 8 * n) =
            make_float2(o_acc[n][2 * h] * inv_l[h], o_acc[n][2 * h + 1] * inv_l[h]);
    }
    return;
  }
  //! [partial]
  // One split: 10a's epilogue. Stage the warp's (16, D) O strip in its Q rows, swizzled: a 4-byte
  // store per accumulator pair; for each n8 tile the warp writes 8 rows x 4 lanes at one chunk
  // position -> a column of the swizzle picture, 32 distinct banks.
  T* sO = sQ + warp_row0 * D;  // (16, D) dtype, swizzled: this warp's O_i / l
#pragma unroll
  for (int n = 0; n < kON; ++n) {
    *reinterpret_cast<std::uint32_t*>(sO + swizzle<D>(g, n) + 2 * t) =
        pack2<T>(o_acc[n][0] * inv_l[0], o_acc[n][1] * inv_l[0]);
    *reinterpret_cast<std::uint32_t*>(sO + swizzle<D>(g + 8, n) + 2 * t) =
        pack2<T>(o_acc[n][2] * inv_l[1], o_acc[n][3] * inv_l[1]);
  }
  // (E) The staged strip is visible to all of the warp's lanes (only this warp reads it).
  __syncwarp();
  // 16-byte stores, a whole row per D/8 consecutive lanes (coalesced), 8 lanes per 128-byte
  // piece of a row: a row of the swizzle picture, 32 distinct banks.
  constexpr int kPerRow = Tile::kChunks;
#pragma unroll
  for (int step = 0; step < Tile::kWarpRows * kPerRow / 32; ++step) {
    const int idx = step * 32 + lane;
    const int r = idx / kPerRow, c = idx % kPerRow;  // strip row, chunk of the row
    const uint4 piece = *reinterpret_cast<const uint4*>(sO + swizzle<D>(r, c));  // (8) dtype
    const int out_row = row0 + warp_row0 + r;
    if (out_row < sh.sq)  // ragged last block: rows past Sq were computed, never stored
      *reinterpret_cast<uint4*>(o + (bh * sh.sq + out_row) * D + c * 8) = piece;
  }
  //! [epilogue]
}

// The combine: one warp per row of O (kCombineRows rows per block), rows = B*H*Sq. Split s holds
// the row's O_s = (its keys' softmax-weighted V) / l_s and lse_s = ln(its keys' sum of exp), so
// the whole row's softmax sum is sum_s exp(lse_s) and O is the mean of the O_s weighted by
// exp(lse_s). Each lane owns D/32 adjacent columns of the row (2 at D = 64, 4 at D = 128).
template <class T, int kD>
__global__ void __launch_bounds__(32 * kCombineRows)
    combine_kernel(const float* __restrict__ o_part, const float* __restrict__ lse_part,
                   T* __restrict__ o, float* __restrict__ lse, std::int64_t rows, int splits) {
  constexpr int kCols = kD / 32;  // columns per lane
  static_assert(kCols % 2 == 0, "a lane stores its columns two by two (pack2)");
  const std::int64_t row = std::int64_t{blockIdx.x} * kCombineRows + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;  // the last block's missing rows: whole warps
  //! [combine]
  // lse_max, the largest partial LSE of the row: the lanes take splits lane, lane + 32, ...
  float lse_max = -INFINITY;
  for (int s = lane; s < splits; s += 32)
    lse_max = fmaxf(lse_max, lse_part[s * rows + row]);
  for (int offset = 16; offset > 0; offset /= 2)
    lse_max = fmaxf(lse_max, __shfl_xor_sync(kFullMask, lse_max, offset));
  // Weights w_s = exp(lse_s - lse_max): the largest is 1 and none overflows, however large the
  // scores. A row that no split saw a key of has every lse_s = -inf: subtracting a safe 0 instead
  // keeps exp(-inf - -inf) = NaN out, every weight is 0, and so is the sum.
  const float shift = lse_max == -INFINITY ? 0.0f : lse_max;
  float sum = 0.0f;
  for (int s = lane; s < splits; s += 32)
    sum += expf(lse_part[s * rows + row] - shift);
  for (int offset = 16; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(kFullMask, sum, offset);
  // O = sum_s w_s O_s / sum_s w_s, LSE = lse_max + ln(sum_s w_s); a row without keys: O = 0,
  // LSE = -inf, as 10a writes it.
  float acc[kCols] = {};
  for (int s = 0; s < splits; ++s) {
    const float w = expf(lse_part[s * rows + row] - shift);
    const float* src = o_part + (s * rows + row) * kD + lane * kCols;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      acc[c] += w * src[c];
  }
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
  if (lane == 0) lse[row] = sum > 0.0f ? shift + logf(sum) : -INFINITY;
  //! [combine]
  T* dst = o + row * kD + lane * kCols;
#pragma unroll
  for (int c = 0; c < kCols; c += 2)
    *reinterpret_cast<std::uint32_t*>(dst + c) = pack2<T>(acc[c] * inv_sum, acc[c + 1] * inv_sum);
}

}  // namespace

FS_DEFINE_KERNEL_OF(fused_attention_kernel<T, Tile, kCausal>)
FS_EXPORT_KERNELS(TileD64)
FS_EXPORT_KERNELS(TileD128)

template <class T, int kD>
CombineKernel<T> Combine::of() {
  return combine_kernel<T, kD>;
}
template CombineKernel<__half> Combine::of<__half, 64>();
template CombineKernel<__half> Combine::of<__half, 128>();
template CombineKernel<__nv_bfloat16> Combine::of<__nv_bfloat16, 64>();
template CombineKernel<__nv_bfloat16> Combine::of<__nv_bfloat16, 128>();

}  // namespace flashsteps::paged_kv
