// =================================================================================================
// Stage 01 — tiled: both products through shared memory with register blocking, S still in global.
//
// What changed since stage 00: the same three kernels and the same fp32 S (then P, in place) in
// global memory, but each product is now a classic tiled SGEMM:
//   * a block computes a (Br, Bc) = (64, 64) tile of S, or a (Br, D) tile of O, walking the
//     reduction dimension in chunks of Bk = 32 staged in shared memory (fp32, converted on load);
//   * each thread keeps a 4 × 4 (scores) or 4 × D/16 (P·V) micro-tile of accumulators in registers;
//   * causal: tiles of S entirely above the diagonal are skipped; P·V stops at the last key its
//     rows see.
// The row softmax is unchanged (flashsteps/cuda/row_softmax.cuh, shared with stage 00).
//
//! [prediction]
// Which metric should move, and by how much (written before measuring). Per score:
//  * Operand bytes requested from L1/L2 by the products fall ~64×: from 4·D (scores) and 6·D (P·V)
//    bytes in stage 00 to D/16 (4 B at D = 64) and 4 + 2·D/Br (6 B at D = 64). l1tex__t_bytes.sum
//    and lts__t_bytes.sum of the two product kernels fall by one to two orders of magnitude, and
//    their long-scoreboard and lg-throttle stalls with them.
//  * DRAM bytes per score do not move: ~16 B per score (~10 B causal), up to 8 B more at Skv of
//    several thousand; dram__bytes_read.sum + dram__bytes_write.sum ≈ 16·B·H·Sq·Skv.
//  * The products become fp32-FMA bound: sm__pipe_fma_cycles_active of the scores and P·V kernels
//    above 50%. Their intensity against DRAM, 32 FLOP/B at D = 64, is past the fp32 ridge of an
//    A100 (≈ 13) but not of an L4 (100). The softmax kernel's own time is exactly stage 00's.
//! [prediction]
//
// Limits: D ∈ {64, 128} (templates; D a multiple of Bk = 32 and of 16), fp16 and bf16, causal or
// not, any Sq, Skv >= 1 while the fp32 S workspace (4·B·H·Sq·Skv bytes) fits in device memory. No
// tensor cores yet. The reasoning and the verdicts: book/chapters/stage_01_tiled.md.
// =================================================================================================
#include <cstring>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/row_softmax.cuh"
#include "flashsteps/cuda_check.hpp"
#include "kernels.cuh"

namespace flashsteps::tiled {
namespace {

// Four consecutive fp16/bf16 elements (one 8-byte load) converted to fp32.
template <class T>
__device__ inline void load4_f32(const T* __restrict__ src, float (&f)[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(src);
  T h[4];
  std::memcpy(h, &raw, sizeof(raw));
#pragma unroll
  for (int e = 0; e < 4; ++e)
    f[e] = to_f32(h[e]);
}

//! [load_chunk]
// Stages columns [d0, d0 + Bk) of `rows` rows of a row-major (rows, D) matrix (Q or K) in shared
// memory as fp32; rows past `rows` are zero-filled, never read. Thread → (row r, 4 columns c): a
// warp covers 4 rows × 32 columns, and with the odd pitch Bk + 1 its 32 stores for each of the
// 4 elements land in 32 different banks.
template <class T, int D, int kRows>
__device__ void load_rows_chunk(const T* __restrict__ src, int rows, int d0,
                                float (*dst)[TiledTraits<D>::kLd]) {
  using Tile = TiledTraits<D>;
  constexpr int kVecsPerRow = Tile::kBk / Tile::kVec;  // 8
  static_assert(kRows * kVecsPerRow % Tile::kThreads == 0, "whole vectors per thread");
#pragma unroll
  for (int it = 0; it < kRows * kVecsPerRow / Tile::kThreads; ++it) {
    const int v = threadIdx.x + it * Tile::kThreads;
    const int r = v / kVecsPerRow, c = (v % kVecsPerRow) * Tile::kVec;
    float f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (r < rows) load4_f32(src + r * D + d0 + c, f);  // 8-byte aligned: D, d0, c are ×4
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dst[r][c + e] = f[e];
  }
}
//! [load_chunk]

//! [scores]
// S[bh, i, j] = scale · Σ_d Q[bh, i, d] · K[bh, j, d] for one (Br, Bc) tile per block iteration.
// Only visible scores (j < kv_end(i)) are written: the row softmax reads nothing else.
template <class T, int D, bool kCausal>
__global__ void __launch_bounds__(TiledTraits<D>::kThreads)
    scores_kernel(const T* __restrict__ q, const T* __restrict__ k, float* __restrict__ s,
                  Shape sh) {
  using Tile = TiledTraits<D>;
  __shared__ float qs[Tile::kBr][Tile::kLd];  // (Br, Bk) chunk of Q, fp32, row pitch Bk + 1
  __shared__ float ks[Tile::kBc][Tile::kLd];  // (Bc, Bk) chunk of K, fp32, row pitch Bk + 1
  const int tx = threadIdx.x % Tile::kThreadsX, ty = threadIdx.x / Tile::kThreadsX;
  const std::int64_t tiles_q = ceil_div(sh.sq, Tile::kBr), tiles_kv = ceil_div(sh.skv, Tile::kBc);

  for (std::int64_t tile = blockIdx.x; tile < sh.bh * tiles_q * tiles_kv; tile += gridDim.x) {
    const std::int64_t bh = tile / (tiles_q * tiles_kv);
    const std::int64_t i0 = tile / tiles_kv % tiles_q * Tile::kBr;  // first query row of the tile
    const std::int64_t j0 = tile % tiles_kv * Tile::kBc;            // first key of the tile
    const int rows_q = static_cast<int>(min(std::int64_t{Tile::kBr}, sh.sq - i0));
    const int rows_k = static_cast<int>(min(std::int64_t{Tile::kBc}, sh.skv - j0));
    // Causal: kv_end grows with i, so if the tile's last row sees none of its keys, no row does.
    // The condition is the same for every thread of the block: skipping cannot split a barrier.
    if (j0 >= causal_kv_end(i0 + rows_q - 1, sh.sq, sh.skv, kCausal)) continue;

    const T* qt = q + (bh * sh.sq + i0) * D;   // (rows_q, D) rows of Q
    const T* kt = k + (bh * sh.skv + j0) * D;  // (rows_k, D) rows of K
    float acc[Tile::kTm][Tile::kTn] = {};      // (Tm, Tn) registers: S[i0+ty+16m, j0+tx+16n]

    for (int d0 = 0; d0 < D; d0 += Tile::kBk) {
      load_rows_chunk<T, D, Tile::kBr>(qt, rows_q, d0, qs);
      load_rows_chunk<T, D, Tile::kBc>(kt, rows_k, d0, ks);
      __syncthreads();  // the chunk is staged: every thread reads rows other threads loaded
#pragma unroll
      for (int kk = 0; kk < Tile::kBk; ++kk) {
        float a[Tile::kTm], b[Tile::kTn];  // a column of the Q chunk, a column of the K chunk
#pragma unroll
        for (int m = 0; m < Tile::kTm; ++m)
          a[m] = qs[ty + Tile::kThreadsY * m][kk];  // two words per warp: broadcasts
#pragma unroll
        for (int n = 0; n < Tile::kTn; ++n)
          b[n] = ks[tx + Tile::kThreadsX * n][kk];  // 16 rows, pitch 33: 16 different banks
#pragma unroll
        for (int m = 0; m < Tile::kTm; ++m)
#pragma unroll
          for (int n = 0; n < Tile::kTn; ++n)
            acc[m][n] = fmaf(a[m], b[n], acc[m][n]);
      }
      __syncthreads();  // all reads of this chunk are done before the next one overwrites it
    }

#pragma unroll
    for (int m = 0; m < Tile::kTm; ++m) {
      const int r = ty + Tile::kThreadsY * m;
      if (r >= rows_q) continue;
      const std::int64_t end = causal_kv_end(i0 + r, sh.sq, sh.skv, kCausal);  // <= Skv
      float* srow = s + (bh * sh.sq + i0 + r) * sh.skv;                        // (Skv) row of S
#pragma unroll
      for (int n = 0; n < Tile::kTn; ++n) {
        const std::int64_t j = j0 + tx + Tile::kThreadsX * n;
        if (j < end) srow[j] = acc[m][n] * sh.scale;
      }
    }
  }
}
//! [scores]

//! [pv]
// O[bh, i, :] = Σ_j P[bh, i, j] · V[bh, j, :] for one (Br, D) tile of O per block iteration:
// the whole row of O in one block, so every output element is written exactly once, by one
// thread, with no atomics. Keys are walked in chunks of Bk up to the last key the tile sees.
template <class T, int D, bool kCausal>
__global__ void __launch_bounds__(TiledTraits<D>::kThreads)
    pv_kernel(const float* __restrict__ p, const T* __restrict__ v, T* __restrict__ o, Shape sh) {
  using Tile = TiledTraits<D>;
  __shared__ float ps[Tile::kBr][Tile::kLd];        // (Br, Bk) chunk of P, row pitch Bk + 1
  __shared__ __align__(16) float vs[Tile::kBk][D];  // (Bk, D) chunk of V, fp32
  const int tx = threadIdx.x % Tile::kThreadsX, ty = threadIdx.x / Tile::kThreadsX;
  const std::int64_t tiles_q = ceil_div(sh.sq, Tile::kBr);

  for (std::int64_t tile = blockIdx.x; tile < sh.bh * tiles_q; tile += gridDim.x) {
    const std::int64_t bh = tile / tiles_q;
    const std::int64_t i0 = tile % tiles_q * Tile::kBr;  // first query row of the tile
    const int rows = static_cast<int>(min(std::int64_t{Tile::kBr}, sh.sq - i0));
    // Keys [0, kv_end) are visible to at least the tile's last row; past it P is 0 for every row.
    // 0 when no row sees a key: the loop does not run and O = 0, as the contract wants.
    const std::int64_t kv_end = causal_kv_end(i0 + rows - 1, sh.sq, sh.skv, kCausal);
    const float* pt = p + (bh * sh.sq + i0) * sh.skv;  // (rows, Skv) rows of P
    const T* vh = v + bh * sh.skv * D;                 // (Skv, D) V of this head
    float acc[Tile::kTm][Tile::kTd] = {};              // (Tm, Td) registers: O[i0+ty+16m, tx+16n]

    for (std::int64_t k0 = 0; k0 < kv_end; k0 += Tile::kBk) {
      const int cols = static_cast<int>(min(std::int64_t{Tile::kBk}, kv_end - k0));
      // P chunk: thread → column c of rows r0, r0 + 8, …: a warp reads 32 consecutive fp32 of
      // one row (128 B) and stores them to one smem row. Outside (rows, cols) zero-filled.
      // Inside, P was written by the softmax (0 past a row's own kv_end), so 0 · V never meets
      // an unwritten value.
      {
        constexpr int kRowStep = Tile::kThreads / Tile::kBk;  // 8 rows per pass of the block
        const int c = threadIdx.x % Tile::kBk, r0 = threadIdx.x / Tile::kBk;
        const float* src = pt + r0 * sh.skv + k0 + c;  // (rows, cols) chunk, element (r0, c)
#pragma unroll
        for (int it = 0; it < Tile::kBr / kRowStep; ++it, src += kRowStep * sh.skv) {
          const int r = r0 + it * kRowStep;
          ps[r][c] = (r < rows && c < cols) ? *src : 0.0f;  // *src only inside the chunk
        }
      }
      // V chunk: each thread converts 4 consecutive elements (8 B) into one float4; 8 threads
      // store 128 contiguous bytes. Keys past `cols` zero-filled: their P is 0, but 0 · garbage
      // could be NaN.
      constexpr int kVecsPerRow = D / Tile::kVec;
#pragma unroll
      for (int it = 0; it < Tile::kBk * kVecsPerRow / Tile::kThreads; ++it) {
        const int vi = threadIdx.x + it * Tile::kThreads;
        const int r = vi / kVecsPerRow, c = (vi % kVecsPerRow) * Tile::kVec;
        float f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (r < cols) load4_f32(vh + (k0 + r) * D + c, f);
        *reinterpret_cast<float4*>(&vs[r][c]) = make_float4(f[0], f[1], f[2], f[3]);
      }
      __syncthreads();  // the chunk is staged
      // Unrolled by 8, not fully: with D = 128 a full unroll hoists the shared loads of all 32
      // steps and leaves no room under ptxas' register target (the ptxas report shows a spill).
#pragma unroll 8
      for (int kk = 0; kk < Tile::kBk; ++kk) {
        float a[Tile::kTm], b[Tile::kTd];  // a column of the P chunk, a row of the V chunk
#pragma unroll
        for (int m = 0; m < Tile::kTm; ++m)
          a[m] = ps[ty + Tile::kThreadsY * m][kk];  // two words per warp: broadcasts
#pragma unroll
        for (int n = 0; n < Tile::kTd; ++n)
          b[n] = vs[kk][tx + Tile::kThreadsX * n];  // 16 consecutive words
#pragma unroll
        for (int m = 0; m < Tile::kTm; ++m)
#pragma unroll
          for (int n = 0; n < Tile::kTd; ++n)
            acc[m][n] = fmaf(a[m], b[n], acc[m][n]);
      }
      __syncthreads();  // all reads of this chunk are done before the next one overwrites it
    }

#pragma unroll
    for (int m = 0; m < Tile::kTm; ++m) {
      const int r = ty + Tile::kThreadsY * m;
      if (r >= rows) continue;
      T* orow = o + (bh * sh.sq + i0 + r) * D;  // (D) row of O
#pragma unroll
      for (int n = 0; n < Tile::kTd; ++n)
        orow[tx + Tile::kThreadsX * n] = from_f32<T>(acc[m][n]);
    }
  }
}
//! [pv]

}  // namespace

template <class T, int D, bool kCausal>
void enqueue(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
  using Tile = TiledTraits<D>;
  float* s = static_cast<float*>(a.workspace);  // (B·H, Sq, Skv) fp32: S, then P in place
  const std::int64_t tiles_q = ceil_div(sh.sq, Tile::kBr);
  const unsigned score_blocks =
      grid_size(sh.bh * tiles_q * ceil_div(sh.skv, Tile::kBc), 1, Tile::kMaxBlocks);
  FS_CUDA_CHECK(launch_kernel(scores_kernel<T, D, kCausal>, score_blocks, Tile::kThreads, 0, stream,
                              static_cast<const T*>(a.q), static_cast<const T*>(a.k), s, sh));
  launch_row_softmax<float, kCausal>(s, s, a.lse, {sh.bh * sh.sq, sh.sq, sh.skv, sh.skv, sh.skv},
                                     stream);
  const unsigned pv_blocks = grid_size(sh.bh * tiles_q, 1, Tile::kMaxBlocks);
  FS_CUDA_CHECK(launch_kernel(pv_kernel<T, D, kCausal>, pv_blocks, Tile::kThreads, 0, stream, s,
                              static_cast<const T*>(a.v), static_cast<T*>(a.o), sh));
}

template <class T, int D, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape&) {
  using Tile = TiledTraits<D>;
  const std::string tag =
      "<d" + std::to_string(D) + "," + dtype_name<T>() + (kCausal ? ",causal>" : ">");
  // Static shared memory only: KernelLaunchInfo::smem_bytes counts the dynamic part (0).
  return {
      {"scores" + tag, reinterpret_cast<const void*>(&scores_kernel<T, D, kCausal>), Tile::kThreads,
       0},
      row_softmax_info<float, kCausal>(),
      {"pv" + tag, reinterpret_cast<const void*>(&pv_kernel<T, D, kCausal>), Tile::kThreads, 0},
  };
}

#define FS_INSTANTIATE(T, D, C)                                                     \
  template void enqueue<T, D, C>(const Shape&, const AttentionArgs&, cudaStream_t); \
  template std::vector<KernelLaunchInfo> kernel_list<T, D, C>(const Shape&);
#define FS_INSTANTIATE_D(D)               \
  FS_INSTANTIATE(__half, D, false)        \
  FS_INSTANTIATE(__half, D, true)         \
  FS_INSTANTIATE(__nv_bfloat16, D, false) \
  FS_INSTANTIATE(__nv_bfloat16, D, true)
FS_INSTANTIATE_D(64)
FS_INSTANTIATE_D(128)
#undef FS_INSTANTIATE_D
#undef FS_INSTANTIATE

}  // namespace flashsteps::tiled
