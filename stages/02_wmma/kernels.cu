// =================================================================================================
// Stage 02 — WMMA: both products on tensor cores, S still in global memory.
//
// What changed since stage 01: the same three kernels and the same (Br, Bc) = (64, 64) tiles of
// S, but the products run on tensor cores through nvcuda::wmma (16 × 16 × 16 fragments, fp16 or
// bf16 inputs, fp32 accumulation):
//   * operands stay in the input dtype in shared memory: a block stages a whole (64, D) tile of Q
//     and of K, and eight warps each multiply a (32, 16) part of the tile of S (kernels.cuh);
//   * P·V runs on tensor cores too, so the softmax writes P in the input dtype into a separate
//     buffer (rows padded to 8 elements); S stays fp32;
//   * accumulators go through an fp32 staging tile in shared memory and are copied out row by row,
//     masked at the ragged edges and by the causal mask; causal tiles are skipped as in stage 01.
//
//! [prediction]
// Which metric should move, and by how much (written before measuring). Per score:
//  * The products leave the fp32 pipe for the tensor pipe: sm__pipe_fma_cycles_active of the
//    scores and P·V kernels falls to the address arithmetic, sm__pipe_tensor_op_hmma_cycles_active
//    rises from 0. Their FLOPs take ~1/16 of their fp32 time (A100: 312 vs 19.5 TFLOP/s), so the
//    tensor pipe stays mostly idle (expect < 20% active) and both kernels become DRAM-bound.
//  * DRAM bytes per score fall from ~16 to ~12 (S 4 B written and read, P 2 B written and read);
//    causal ~7 B. dram__bytes_read.sum + dram__bytes_write.sum ≈ 12·B·H·Sq·Skv and dram__throughput
//    above 70% of peak in all three kernels: the stage's time ≈ 12·B·H·Sq·Skv bytes / DRAM
//    bandwidth, and the softmax kernel, 6 of those 12 bytes, is about half of it.
//  * Against baseline_cublas: within ~1.3× without a mask, faster with one.
//! [prediction]
//
// Limits: D ∈ {64, 128} (templates; D a multiple of 64), fp16 and bf16, causal or not, any Sq,
// Skv >= 1 while S (4 B) and P (2 B) per score fit in device memory; sm_80 or newer (bf16 WMMA).
// Shared memory 18 KiB (D = 64) and 34 KiB (D = 128) per block, checked against the device's
// opt-in limit. The reasoning and the verdicts: book/chapters/stage_02_wmma.md.
// =================================================================================================
#include <mma.h>

#include <cstring>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/row_softmax.cuh"
#include "flashsteps/cuda_check.hpp"
#include "kernels.cuh"

namespace flashsteps::wmma_stage {
namespace {

namespace wmma = nvcuda::wmma;

//! [copy_tile]
// Copies a (kRows, kCols) tile of a row-major 16-bit matrix (rows `src_ld` elements apart) into
// shared memory with row pitch kLd, 16 bytes per thread per step; 8 consecutive threads fill 128
// contiguous bytes of a smem row. A vector is copied when its row is below `rows` and its first
// column below `cols`, otherwise zero-filled: the caller guarantees that such a vector lies
// inside the source row (cols rounded up to 8 is within the row pitch). The zeros matter: a
// garbage operand could be NaN, and 0 · NaN = NaN would leak into valid outputs.
template <int kRows, int kCols, int kLd, int kThreads, class T>
__device__ void copy_tile(T* __restrict__ dst, const T* __restrict__ src, std::int64_t src_ld,
                          int rows, int cols) {
  constexpr int kVecsPerRow = kCols / 8;
  static_assert(kCols % 8 == 0 && (kRows * kVecsPerRow) % kThreads == 0,
                "whole 16-byte vectors, the same number per thread");
#pragma unroll
  for (int it = 0; it < kRows * kVecsPerRow / kThreads; ++it) {
    const int v = threadIdx.x + it * kThreads;
    const int r = v / kVecsPerRow, c = v % kVecsPerRow * 8;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r < rows && c < cols) val = *reinterpret_cast<const uint4*>(src + r * src_ld + c);
    *reinterpret_cast<uint4*>(dst + r * kLd + c) = val;
  }
}
//! [copy_tile]

// WMMA's alignment rule, in the two documents that state it. The CUDA C++ Programming Guide
// ("Warp Matrix Functions": load_matrix_sync, store_matrix_sync) asks for a 32-byte aligned
// fragment pointer and an ldm that is a multiple of 16 bytes; the traits assert both. The PTX ISA
// ("Matrix Storage for WMMA", Address Alignment) asks that every row start aligned to the size of
// the fragment one thread holds ("Matrix Fragments for WMMA"): 32 bytes for fp16 operands (its own
// example: wmma.load.a of .f16 needs 2 · stride a multiple of 32) and for fp32 accumulators, 16
// bytes for bf16 operands. The 16-byte pads meet the guide's rule but start every other row of an
// fp16 tile and of the fp32 staging tile 16 bytes past a 32-byte boundary, which the PTX text does
// not allow. The stage relies on the guide, the contract of the C++ API it calls, and on what that
// API compiles to: for sm_80, sm_89 and sm_90a, ptxas (CUDA 13) turns the loads into ldmatrix
// (LDSM, each lane addressing one 16-byte row) and the stores into 8-byte STS.64, for fp16 and
// bf16 alike, so 16-byte rows are all the instructions need. Rows padded to 32 bytes would satisfy
// both texts, but rows r and r + 4 of every 8-row ldmatrix phase would then share banks: a 2-way
// conflict on every fragment load (and 2 KiB more shared memory per block).

//! [scores]
// S[bh, i, j] = scale · Σ_d Q[bh, i, d] · K[bh, j, d] for one (Br, Bc) tile per block iteration,
// on tensor cores. Only visible scores (j < kv_end(i)) are written: the softmax reads no other.
template <class T, int D, bool kCausal>
__global__ void __launch_bounds__(WmmaTraits<D>::kThreads)
    scores_kernel(const T* __restrict__ q, const T* __restrict__ k, float* __restrict__ s,
                  Shape sh) {
  using Tile = WmmaTraits<D>;
  FS_DYNAMIC_SHARED(__align__(128) unsigned char, smem);
  T* qs = reinterpret_cast<T*>(smem);                  // (Br, D) tile of Q, pitch D + 8
  T* ks = reinterpret_cast<T*>(smem + Tile::kQBytes);  // (Bc, D) tile of K, pitch D + 8
  float* ss = reinterpret_cast<float*>(smem);  // (Br, Bc) fp32 S, pitch Bc + 4; aliases qs, ks
  const int warp = threadIdx.x / 32;
  const int wm = warp / Tile::kWarpsN, wn = warp % Tile::kWarpsN;  // this warp's part of the tile
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

    copy_tile<Tile::kBr, D, Tile::kLdQK, Tile::kThreads>(qs, q + (bh * sh.sq + i0) * D, D, rows_q,
                                                         D);
    copy_tile<Tile::kBc, D, Tile::kLdQK, Tile::kThreads>(ks, k + (bh * sh.skv + j0) * D, D, rows_k,
                                                         D);
    __syncthreads();  // the tiles are staged: each warp reads rows other warps copied

    // (32, 16) part of S per warp: rows wm·32 + 16·fm, keys wn·16 + 16·fn.
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[Tile::kFragsM][Tile::kFragsNS];
#pragma unroll
    for (int fm = 0; fm < Tile::kFragsM; ++fm)
#pragma unroll
      for (int fn = 0; fn < Tile::kFragsNS; ++fn)
        wmma::fill_fragment(acc[fm][fn], 0.0f);

        // Unrolled by 2, not fully: a full unroll hoists every fragment load of the loop ahead of
        // the MMAs and costs ~1.5x the registers (see the ptxas report) for no gain in a kernel
        // bound by S's traffic.
#pragma unroll 2
    for (int kk = 0; kk < D; kk += Tile::kFrag) {
      // (16, 16) pieces of Q (row-major) and of Kᵀ: K's rows are Kᵀ's columns, so the K tile
      // read with its own pitch is Kᵀ in column-major order — no transpose is ever stored.
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[Tile::kFragsM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[Tile::kFragsNS];
#pragma unroll
      for (int fm = 0; fm < Tile::kFragsM; ++fm)
        wmma::load_matrix_sync(a[fm], qs + (wm * Tile::kWarpRows + fm * 16) * Tile::kLdQK + kk,
                               Tile::kLdQK);
#pragma unroll
      for (int fn = 0; fn < Tile::kFragsNS; ++fn)
        wmma::load_matrix_sync(b[fn], ks + (wn * Tile::kWarpColsS + fn * 16) * Tile::kLdQK + kk,
                               Tile::kLdQK);
#pragma unroll
      for (int fm = 0; fm < Tile::kFragsM; ++fm)
#pragma unroll
        for (int fn = 0; fn < Tile::kFragsNS; ++fn)
          wmma::mma_sync(acc[fm][fn], a[fm], b[fn], acc[fm][fn]);
    }

    __syncthreads();  // every warp is done with Q and K: the staging tile overwrites them
#pragma unroll
    for (int fm = 0; fm < Tile::kFragsM; ++fm)
#pragma unroll
      for (int fn = 0; fn < Tile::kFragsNS; ++fn) {
        // Element-wise on a fragment is layout-agnostic: every element gets the same scale.
#pragma unroll
        for (int e = 0; e < acc[fm][fn].num_elements; ++e)
          acc[fm][fn].x[e] *= sh.scale;
        wmma::store_matrix_sync(
            ss + (wm * Tile::kWarpRows + fm * 16) * Tile::kLdS + wn * Tile::kWarpColsS + fn * 16,
            acc[fm][fn], Tile::kLdS, wmma::mem_row_major);
      }
    __syncthreads();  // the whole S tile is staged: each thread copies out other warps' values

    // Masked copy-out: a warp writes 32 consecutive scores of one row (128 B).
#pragma unroll 4
    for (int it = 0; it < Tile::kBr * Tile::kBc / Tile::kThreads; ++it) {
      const int e = threadIdx.x + it * Tile::kThreads;
      const int r = e / Tile::kBc, c = e % Tile::kBc;
      if (r >= rows_q) break;  // rows grow with it: the rest of this thread's elements are out too
      const std::int64_t j = j0 + c;
      if (j < causal_kv_end(i0 + r, sh.sq, sh.skv, kCausal))  // <= Skv: also the ragged edge
        s[(bh * sh.sq + i0 + r) * sh.skv + j] = ss[r * Tile::kLdS + c];
    }
    __syncthreads();  // the staging tile is read before the next tile's copies overwrite it
  }
}
//! [scores]

//! [pv]
// O[bh, i, :] = Σ_j P[bh, i, j] · V[bh, j, :] for one (Br, D) tile of O per block iteration, on
// tensor cores: the whole row of O in one block, so every output element is written exactly
// once, with no atomics. Keys are walked in chunks of Bk up to the last key the tile sees.
template <class T, int D, bool kCausal>
__global__ void __launch_bounds__(WmmaTraits<D>::kThreads)
    pv_kernel(const T* __restrict__ p, const T* __restrict__ v, T* __restrict__ o, Shape sh) {
  using Tile = WmmaTraits<D>;
  FS_DYNAMIC_SHARED(__align__(128) unsigned char, smem);
  T* ps = reinterpret_cast<T*>(smem);                  // (Br, Bk) chunk of P, pitch Bk + 8
  T* vs = reinterpret_cast<T*>(smem + Tile::kPBytes);  // (Bk, D) chunk of V, pitch D + 8
  float* os = reinterpret_cast<float*>(smem);  // (Br, D) fp32 O, pitch D + 4; aliases ps, vs
  const int warp = threadIdx.x / 32;
  const int wm = warp / Tile::kWarpsN, wn = warp % Tile::kWarpsN;  // this warp's part of the tile
  const std::int64_t tiles_q = ceil_div(sh.sq, Tile::kBr);

  for (std::int64_t tile = blockIdx.x; tile < sh.bh * tiles_q; tile += gridDim.x) {
    const std::int64_t bh = tile / tiles_q;
    const std::int64_t i0 = tile % tiles_q * Tile::kBr;  // first query row of the tile
    const int rows = static_cast<int>(min(std::int64_t{Tile::kBr}, sh.sq - i0));
    // Keys [0, kv_end) are visible to at least the tile's last row; past it P is 0 for every row.
    // 0 when no row sees a key: the loop does not run and O = 0, as the contract wants.
    const std::int64_t kv_end = causal_kv_end(i0 + rows - 1, sh.sq, sh.skv, kCausal);
    const T* pt = p + (bh * sh.sq + i0) * sh.ldp;  // (rows, ldp) rows of P
    const T* vh = v + bh * sh.skv * D;             // (Skv, D) V of this head

    // (32, D/4) part of O per warp: rows wm·32 + 16·fm, columns wn·D/4 + 16·fn.
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[Tile::kFragsM][Tile::kFragsNO];
#pragma unroll
    for (int fm = 0; fm < Tile::kFragsM; ++fm)
#pragma unroll
      for (int fn = 0; fn < Tile::kFragsNO; ++fn)
        wmma::fill_fragment(acc[fm][fn], 0.0f);

    for (std::int64_t k0 = 0; k0 < kv_end; k0 += Tile::kBk) {
      const int cols = static_cast<int>(min(std::int64_t{Tile::kBk}, kv_end - k0));
      // P: k0 + (a multiple of 8 below cols) + 8 <= kv_end rounded up to 8 <= ldp, inside the
      // row, and the softmax wrote every column below ldp (0 past each row's own kv_end).
      copy_tile<Tile::kBr, Tile::kBk, Tile::kLdP, Tile::kThreads>(ps, pt + k0, sh.ldp, rows, cols);
      // V: keys past `cols` zero-filled (their P is 0, but V's rows past Skv do not exist).
      copy_tile<Tile::kBk, D, Tile::kLdV, Tile::kThreads>(vs, vh + k0 * D, D, cols, D);
      __syncthreads();  // the chunk is staged

      // Unrolled by 2, not fully, for the same reason as in the scores kernel.
#pragma unroll 2
      for (int kk = 0; kk < Tile::kBk; kk += Tile::kFrag) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[Tile::kFragsM];   // P
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b[Tile::kFragsNO];  // V
#pragma unroll
        for (int fm = 0; fm < Tile::kFragsM; ++fm)
          wmma::load_matrix_sync(a[fm], ps + (wm * Tile::kWarpRows + fm * 16) * Tile::kLdP + kk,
                                 Tile::kLdP);
#pragma unroll
        for (int fn = 0; fn < Tile::kFragsNO; ++fn)
          wmma::load_matrix_sync(b[fn], vs + kk * Tile::kLdV + wn * Tile::kWarpColsO + fn * 16,
                                 Tile::kLdV);
#pragma unroll
        for (int fm = 0; fm < Tile::kFragsM; ++fm)
#pragma unroll
          for (int fn = 0; fn < Tile::kFragsNO; ++fn)
            wmma::mma_sync(acc[fm][fn], a[fm], b[fn], acc[fm][fn]);
      }
      __syncthreads();  // all reads of this chunk are done before the next one overwrites it
    }

    // The staging tile aliases ps and vs: the key loop's last barrier (or, with no keys, the
    // previous tile's last one) guarantees nobody reads them any more.
#pragma unroll
    for (int fm = 0; fm < Tile::kFragsM; ++fm)
#pragma unroll
      for (int fn = 0; fn < Tile::kFragsNO; ++fn)
        wmma::store_matrix_sync(
            os + (wm * Tile::kWarpRows + fm * 16) * Tile::kLdO + wn * Tile::kWarpColsO + fn * 16,
            acc[fm][fn], Tile::kLdO, wmma::mem_row_major);
    __syncthreads();  // the whole O tile is staged

    // Copy-out in the dtype, 8 elements (16 B) per thread; rows of O are D·2 bytes, 16-aligned.
    constexpr int kVecsPerRow = D / 8;
#pragma unroll
    for (int it = 0; it < Tile::kBr * kVecsPerRow / Tile::kThreads; ++it) {
      const int vi = threadIdx.x + it * Tile::kThreads;
      const int r = vi / kVecsPerRow, c = vi % kVecsPerRow * 8;
      if (r >= rows) break;  // rows grow with it: the rest of this thread's vectors are out too
      const float* src = os + r * Tile::kLdO + c;
      T out[8];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        out[e] = from_f32<T>(src[e]);
      uint4 raw;
      std::memcpy(&raw, out, sizeof(raw));
      *reinterpret_cast<uint4*>(o + (bh * sh.sq + i0 + r) * D + c) = raw;
    }
    __syncthreads();  // the staging tile is read before the next tile's copies overwrite it
  }
}
//! [pv]

template <class T, int D, bool kCausal>
void set_smem_limits() {
  using Tile = WmmaTraits<D>;
  FS_CUDA_CHECK(allow_dynamic_smem(scores_kernel<T, D, kCausal>, Tile::kScoresSmemBytes));
  FS_CUDA_CHECK(allow_dynamic_smem(pv_kernel<T, D, kCausal>, Tile::kPvSmemBytes));
}

template <int D>
void set_smem_limits_all() {
  set_smem_limits<__half, D, false>();
  set_smem_limits<__half, D, true>();
  set_smem_limits<__nv_bfloat16, D, false>();
  set_smem_limits<__nv_bfloat16, D, true>();
}

}  // namespace

int smem_bytes(int d) {
  auto both = [](int a, int b) { return a > b ? a : b; };
  if (d == 64) return both(WmmaTraits<64>::kScoresSmemBytes, WmmaTraits<64>::kPvSmemBytes);
  if (d == 128) return both(WmmaTraits<128>::kScoresSmemBytes, WmmaTraits<128>::kPvSmemBytes);
  return 0;
}

void configure_kernels(const DeviceInfo& dev) {
  // Needed only past the default 48 KB, harmless below it; a head dim whose kernels do not fit
  // is refused by supports() before any launch.
  if (smem_bytes(64) <= dev.smem_optin_per_block) set_smem_limits_all<64>();
  if (smem_bytes(128) <= dev.smem_optin_per_block) set_smem_limits_all<128>();
}

template <class T, int D, bool kCausal>
void enqueue(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
  using Tile = WmmaTraits<D>;
  float* s = static_cast<float*>(a.workspace);  // (B·H, Sq, Skv) fp32
  T* p = reinterpret_cast<T*>(static_cast<unsigned char*>(a.workspace) +
                              p_offset_bytes(sh.bh, sh.sq, sh.skv));  // (B·H, Sq, ldp) dtype
  const std::int64_t tiles_q = ceil_div(sh.sq, Tile::kBr);
  const unsigned score_blocks =
      grid_size(sh.bh * tiles_q * ceil_div(sh.skv, Tile::kBc), 1, Tile::kMaxBlocks);
  FS_CUDA_CHECK(launch_kernel(scores_kernel<T, D, kCausal>, score_blocks, Tile::kThreads,
                              Tile::kScoresSmemBytes, stream, static_cast<const T*>(a.q),
                              static_cast<const T*>(a.k), s, sh));
  launch_row_softmax<T, kCausal>(s, p, a.lse, {sh.bh * sh.sq, sh.sq, sh.skv, sh.skv, sh.ldp},
                                 stream);
  const unsigned pv_blocks = grid_size(sh.bh * tiles_q, 1, Tile::kMaxBlocks);
  FS_CUDA_CHECK(launch_kernel(pv_kernel<T, D, kCausal>, pv_blocks, Tile::kThreads,
                              Tile::kPvSmemBytes, stream, p, static_cast<const T*>(a.v),
                              static_cast<T*>(a.o), sh));
}

template <class T, int D, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape&) {
  using Tile = WmmaTraits<D>;
  const std::string tag =
      "<d" + std::to_string(D) + "," + dtype_name<T>() + (kCausal ? ",causal>" : ">");
  return {
      {"scores" + tag, reinterpret_cast<const void*>(&scores_kernel<T, D, kCausal>), Tile::kThreads,
       static_cast<std::size_t>(Tile::kScoresSmemBytes)},
      row_softmax_info<T, kCausal>(),
      {"pv" + tag, reinterpret_cast<const void*>(&pv_kernel<T, D, kCausal>), Tile::kThreads,
       static_cast<std::size_t>(Tile::kPvSmemBytes)},
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

}  // namespace flashsteps::wmma_stage
