// =================================================================================================
// Stage 09e — the backward on wgmma: stage 09d's walk with its five products on Hopper's
// warpgroup MMA (sm_90a), one warpgroup per block — FlashAttention-3's products, without its
// producer warpgroup or its dQ writer yet.
//
// What changed since stage 09d:
//  * The block is one warpgroup (128 threads) owning Bc = 64 keys, and Br = 64 query rows per tile
//    at both head dims: wgmma's m = 64 is the keys for Sᵀ, dPᵀ, dK_j, dV_j and the queries for dQ.
//  * Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ are m64n64k16 with both operands in shared memory (SS), all
//    K-major: K_j, V_j as A and Q_i, dO_i as B are stored with d contiguous, the k of these two.
//  * dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i are m64n{D}k16 with A from registers (RS): the Sᵀ and dPᵀ
//    accumulators, rounded and packed as in 09c (wgmma's accumulator rows are keys, so Pᵀ and dSᵀ
//    are already the A operand: FlashAttention-3's choice). B = dO_i, Q_i read MN-major
//    (imm-tnsp-b = 1): their k (the query) runs down the stored rows.
//  * dQ_i += dS K_j: m64n64k16 SS per 64 columns of D. A = dS with queries as m, which no thread
//    holds (the accumulators' rows are keys): each thread stores its dSᵀ elements transposed into
//    a (Br, Bc) dS tile, K-major for the A descriptor (the emulator's shim, and ptx.cuh, take A
//    from shared memory K-major only); B = K_j read MN-major. Added into the fp32 accumulator
//    with atomics, as 09d.
//  * Shared tiles in 07a's layout: 128B-swizzled (rows, 64) column blocks; the ring's copies
//    (09d's cp.async, 16-byte pieces) compute the swizzled address. No ldmatrix is left.
//  * wgmma reads shared memory through the async proxy: a fence.proxy.async after the wait for a
//    tile's copies and after the dS stores; wgmma.fence, commit_group and wait_group<0> around each
//    batch, waited at once (synchronous, as 07a): nothing overlaps yet.
// Unchanged: the walk, the ring of two slots and where it is refilled, the recompute, D by the
// first kernel, dQ by fp32 atomicAdd into the workspace and its conversion.
//
//! [prediction]
// Which metric should move (written before measuring, before any GPU run; H100/H200 SXM, fp16,
// S = 2048). 09d's products are mma.sync m16n8k16, per warp, fed by ldmatrix; here a tile's
// same FLOPs are 20 (D = 64) or 32 (D = 128) wgmma per warpgroup, whose operands the tensor
// cores read from shared memory themselves, at the rate only wgmma reaches on Hopper (07a's
// chapter). The waits are synchronous and one warpgroup per block computes the recompute
// between the products, so the tensor cores idle during it, as in 07a. So:
//  * 1.3x to 2.2x faster than 09d at S = 2048, D = 64 and 128 (07a's gain over 06c was 1.1-1.5x
//    with a softmax of the same size; the backward has 2.5x the FLOPs per recompute element);
//  * against SDPA's flash backward (FlashAttention-2 on Hopper, same run): 0.8x to 1.6x; against
//    its cuDNN backward (Hopper kernels of NVIDIA's own, same run) 0.5x to 1.1x;
//    against FlashAttention-3's published backward (its paper, Fig. 6: H100 SXM5, D = 128,
//    316, 501, 561 TFLOP/s at S = 512, 2k, 16k) 0.35x to 0.6x at S = 2k: no producer warpgroup,
//    no overlap of the recompute with the products, no second consumer warpgroup;
//  * registers: at most 255 per thread (launch bound of one 128-thread block), no spill.
//! [prediction]
//
// Revised after the first sm_90a builds (ptxas, no GPU run; predictions.csv judges the lines
// above). The first build gave every variant the 255 registers the launch bound allows and, at
// D = 128, spilled (312-464 bytes of stores per variant; D = 64: 230-234 registers, no spill).
// Tried then: dQ_i 64 columns at a time (kept), the mask as 32-bit tile bounds (kept: 256-264
// bytes after it), rolled k-loops (736-756, reverted), descriptors recomputed at each use (no
// change), Sᵀ and dPᵀ one after the other (272-312, reverted). The SASS (nvdisasm) showed what
// spilled: not the accumulators but addresses the walk keeps because they do not change from tile
// to tile — the 16 global and shared addresses of a thread's ring copies (one per 16-byte piece,
// as 09d computes them) and the 32 swizzled addresses of its dS stores, each reloaded from local
// memory at every tile. Both are one per-thread base plus constants (load_rows_async(), my_ds):
// with the copies' base alone fp16 D = 128 spills 40 bytes (16 causal), with the dS base alone 72
// (104 causal), with both none. Now no variant spills: D = 128 uses 227 registers (228 causal),
// D = 64 184 (191 causal), and ptxas reports no serialized wgmma. The tile stays Br = Bc = 64,
// one warpgroup.
//
// Limits: compute capability 9.0 exactly (sm_90a: wgmma; launcher.cu refuses other devices);
// D = 64 and 128, fp16 and bf16, causal or not, any Sq, Skv >= 1; Q, K, V, O and dO 16-byte
// aligned; B·H·⌈Skv/64⌉ < 2^31 blocks; the fp32 accumulator and D (4·B·H·Sq·(D+1) bytes) must
// fit in device memory. dQ is not bitwise reproducible on a GPU (the atomics' order); dK and dV
// are. Next splits of this step: a TMA producer warp, dQ written by a bulk reduce-add, and a
// deterministic mode. The chapter: book/chapters/stage_09e_bwd_wgmma.md.
// =================================================================================================
#include <cuda/pipeline>
#include <cuda/ptx>

#include <cfloat>
#include <cmath>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::bwd_wgmma {
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

//! [swizzle]
// Where chunk c (16 bytes, 8 elements) of row r of a (kRows, D) tile lives, in elements from the
// tile's start: stage 07a's layout, which the descriptors' 128-byte swizzle mode reads — (kRows,
// 64) column blocks of 128-byte rows, chunk c of a block's row r at chunk position c ^ (r % 8)
// inside each 1024-byte atom of 8 rows (07a's chapter draws it).
template <int kRows>
__device__ __forceinline__ int swizzle(int r, int c) {
  return (c / 8) * kRows * 64 + r * 64 + ((c % 8) ^ (r % 8)) * 8;
}
//! [swizzle]

//! [load_rows_async]
// Issues the copy of rows [row0, row0 + kRows) of a head's (n_rows, D) matrix into a shared tile
// in 07a's swizzled layout (swizzle()), one 16-byte cp.async per thread and step, consecutive
// threads on consecutive pieces of a row; rows at or past n_rows become zeros, stored by the
// thread (never read from global memory). The copies join this thread's open commit group.
// A thread keeps its piece of the row (chunk c) at every step and moves down kRowStep rows, a
// multiple of 8: the swizzle's r % 8 stays the same, so step s's shared address is step 0's plus
// s·kRowStep rows and its global address step 0's plus s·kRowStep·D elements. One base address of
// each side and one row count per thread, the steps as constant offsets: with an address per step,
// as 09d's copies compute them, ptxas kept 16 of them live through the walk at D = 128.
template <int kRows, int kD, int kThreads, class T>
__device__ __forceinline__ void load_rows_async(T* __restrict__ dst, const T* __restrict__ src,
                                                std::int64_t row0, std::int64_t n_rows,
                                                Pipeline& pipe) {
  constexpr int kVec = 16 / sizeof(T), kPerRow = kD / kVec;  // 16-byte pieces per row
  constexpr int kRowStep = kThreads / kPerRow;               // rows one step moves down
  static_assert(kRowStep % 8 == 0, "each step moves down whole 8-row swizzle atoms");
  const int e = static_cast<int>(threadIdx.x);  // this thread's piece at step 0
  const int r = e / kPerRow, c = e % kPerRow * kVec;
  T* to = dst + swizzle<kRows>(r, c / kVec);
  const T* from = src + (row0 + r) * kD + c;
  const std::int64_t left = n_rows - row0 - r;  // rows from r on that exist
#pragma unroll
  for (int step = 0; step < kRows * kPerRow / kThreads; ++step) {
    if (step * kRowStep < left)
      cuda::memcpy_async(to + step * kRowStep * 64, from + step * kRowStep * kD,
                         cuda::aligned_size_t<16>(16), pipe);
    else
      *reinterpret_cast<uint4*>(to + step * kRowStep * 64) = make_uint4(0u, 0u, 0u, 0u);
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
// Which operand is read how. wgmma.mma_async m64nNk16 computes D (64 x N) += A (64 x 16) B (16 x
// N); from shared memory it reads A "K-major" (k contiguous along a stored row) and B K-major
// (imm-tnsp-b = 0: the stored rows are n, k contiguous) or MN-major (imm-tnsp-b = 1: the stored
// rows are k, n contiguous). A can also come from registers, in the accumulator's own layout:
//
//   product (warpgroup)         A (m x k)                 B (k x n)                   k
//   Sᵀ   = K_j  Q_iᵀ            K_j, shared, K-major      Q_i, shared, K-major        d
//   dPᵀ  = V_j  dO_iᵀ           V_j, shared, K-major      dO_i, shared, K-major       d
//   dV_j += Pᵀ  dO_i            Pᵀ: registers (Sᵀ acc.)   dO_i, shared, MN-major      query
//   dK_j += dSᵀ Q_i             dSᵀ: registers (dPᵀ acc.) Q_i, shared, MN-major       query
//   dQ_i += dS  K_j             dS: shared, K-major       K_j, shared, MN-major       key
//
// 09d's table, with ldmatrix's ".trans" become the descriptor's transpose bit. m is the block's 64
// keys in the first four rows and the tile's 64 query rows in the last. Warp w holds accumulator
// rows 16w .. 16w + 15, each n8 slice in mma.m16n8k16's C layout (ptx.cuh): exactly 09d's per-warp
// strips, so the recompute and a_fragment() are 09d's lines. dQ needs dS with queries as m, which
// no thread holds: the threads store dSᵀ transposed, as dS, into shared memory.
//! [operands]

//! [wgmma_ss]
// wgmma.mma_async.sync.aligned.m64n64k16.f32.T.T d, a-desc, b-desc, p, 1, 1, 0, kTnspB: both
// operands from shared memory, A K-major, B K-major (kTnspB = 0) or MN-major (1). ptx.cuh has the
// m64n128 SS form (both K-major) and the register-A forms; this step needs m64n64 with either B.
// d is 64 x 64 fp32: 32 registers per thread in the accumulator layout, not valid until
// wgmma_wait_group().
template <class T, int kTnspB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], std::uint64_t desc_a,
                                                   std::uint64_t desc_b, int scale_d) {
#if defined(FLASHSTEPS_EMULATE)
  fsemu::ptx::wgmma(std::is_same_v<T, __nv_bfloat16>, 64, d, desc_a, nullptr, desc_b, kTnspB != 0,
                    scale_d);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FS_WGMMA_SS64(TY)                                                                          \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY                                      \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "         \
      "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                    \
      "%32, %33, p, 1, 1, 0, %35;\n}\n"                                                            \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                         \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTnspB))
  if constexpr (std::is_same_v<T, __half>) {
    FS_WGMMA_SS64("f16");
  } else {
    FS_WGMMA_SS64("bf16");
  }
#undef FS_WGMMA_SS64
#else
  (void)d, (void)desc_a, (void)desc_b, (void)scale_d;
  __trap();  // sm_90a only
#endif
}

// The 4·kN accumulator registers of a (64, 8·kN) strip held as kN n8 slices of 4, as one array:
// the wgmma wrappers' and wgmma_fence_operand()'s view of it.
template <int kR, int kN>
__device__ __forceinline__ float (&regs(float (&acc)[kN][4]))[kR] {
  static_assert(kR == 4 * kN, "all of the accumulator's registers");
  return *reinterpret_cast<float(*)[kR]>(&acc[0][0]);
}

// The descriptor of k16 step kk of a swizzled (kRows, cols) tile at `tile`: K-major (k along the
// stored rows: column block kk / 4, + 32 bytes per step inside it) or MN-major (k down the stored
// rows: rows 16 kk .., the next 64 columns one column block further, the leading byte offset).
// The stride byte offset is one atom, the next 8 rows, in both (ptx.cuh, wgmma_desc_sw128).
template <bool kMnMajor, int kRows, class T>
__device__ __forceinline__ std::uint64_t desc(const T* tile, int kk) {
  constexpr std::uint32_t kBlock = kRows * 128;  // bytes of one (kRows, 64) column block
  const std::uint32_t at = kMnMajor ? kk * 16 * 128 : (kk / 4) * kBlock + (kk % 4) * 32;
  return ptx::wgmma_desc_sw128(ptx::smem_addr(tile) + at, kMnMajor ? kBlock : 16, 1024);
}
//! [wgmma_ss]

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
__global__ void __launch_bounds__(Tile::kThreads, 1)
    fused_backward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const T* __restrict__ dout, const float* __restrict__ lse,
                          const float* __restrict__ dsum, float* __restrict__ dq_accum,
                          T* __restrict__ dk, T* __restrict__ dv, Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc, kThreads = Tile::kThreads;
  constexpr int kDK = Tile::kDK, kQN = Tile::kQN, kQK = Tile::kQK, kDN = Tile::kDN;

  FS_DYNAMIC_SHARED(unsigned char, smem_raw);
  // Round the base up to 1024 bytes: swizzle atoms and the descriptors (base offset 0) assume it.
  unsigned char* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  T* sK = reinterpret_cast<T*>(smem + Tile::kOffK);    // (Bc, D) dtype, swizzled: K_j
  T* sV = reinterpret_cast<T*>(smem + Tile::kOffV);    // (Bc, D) dtype, swizzled: V_j
  T* sdS = reinterpret_cast<T*>(smem + Tile::kOffDS);  // (Br, Bc) dtype, swizzled: dS_ij
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

  // Where this thread stores its dSᵀ elements in the dS tile: element e of slice n is query r =
  // 8n + 2t + e % 2 and key key0 + g + 8(e / 2), so row r, chunk 2·warp + e / 2 (a row is the Bc =
  // 64 keys, one column block), element g of it, swizzled: chunk (2·warp + h) ^ (r % 8) with
  // r % 8 = 2t + l (h = e / 2, l = e % 2), which is 2(warp ^ t) + (h ^ l). So the address is the
  // one of n = 0, e = 0 plus 8n + l rows and h ^ l chunks: a base and 32 constants. (Computed
  // per element, as 09d's stores are, ptxas kept the 32 addresses live through the walk.)
  T* my_ds = sdS + swizzle<Br>(2 * t, key0 / 8) + g;
  static_assert(Bc == 64 && Tile::kWarpKeys == 16, "a dS row is one column block; chunk 2·warp");
  const auto ds_at = [](int n, int e) { return (8 * n + e % 2) * 64 + ((e / 2) ^ (e % 2)) * 8; };

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
      load_rows_async<Br, D, kThreads>(reinterpret_cast<T*>(s + Tile::kOffQ), q_head, row0, sh.sq,
                                       pipe);
      load_rows_async<Br, D, kThreads>(reinterpret_cast<T*>(s + Tile::kOffDO), do_head, row0, sh.sq,
                                       pipe);
      load_row_stats_async<Br>(reinterpret_cast<float*>(s + Tile::kOffLse),
                               reinterpret_cast<float*>(s + Tile::kOffDelta), lse_head, dsum_head,
                               row0, sh.sq, pipe);
    }
    pipe.producer_commit();  // cp.async.commit_group
  };
  // K_j and V_j stay in shared memory for the whole walk: they ride the first tile's group.
  load_rows_async<Bc, D, kThreads>(sK, k + bh * sh.skv * D, kv0, sh.skv, pipe);
  load_rows_async<Bc, D, kThreads>(sV, v + bh * sh.skv * D, kv0, sh.skv, pipe);
#pragma unroll
  for (int p = 0; p < Tile::kStages; ++p)
    prefetch(i_first + p);
  //! [ring]

  // The warp's strips of dK_j and dV_j, (16 keys, D) fp32 as D/8 accumulator tiles (16, 8):
  // element e of tile n is key my_key[e / 2], column 8n + 2t + e % 2.
  float dk_acc[kDN][4] = {};  // dK_j / scale
  float dv_acc[kDN][4] = {};  // dV_j

  //! [walk]
  for (int i = i_first; i < tr; ++i) {
    const std::int64_t row0 = std::int64_t{i} * Br;  // first row of Q_i
    // This thread's copies of tile i have landed: only the kStages - 1 newest groups (tiles
    // i+1 .. i+kStages-1) may still be in flight. At the first tile this covers K_j, V_j too.
    cuda::pipeline_consumer_wait_prior<Tile::kStages - 1>(pipe);
    // They (and the zeros stored past Sq, Skv) were written through the generic proxy; wgmma
    // reads through the async proxy: each thread fences its own writes (07a's wait).
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    // (A) Every thread's pieces of tile i (and at the first tile K_j, V_j) are visible to every
    // warp, and every thread has waited for the last tile's dQ wgmmas, which read dS_ij.
    __syncthreads();
    T* sQ = reinterpret_cast<T*>(slot(i) + Tile::kOffQ);                  // (Br, D) dtype: Q_i
    T* sdO = reinterpret_cast<T*>(slot(i) + Tile::kOffDO);                // (Br, D) dtype: dO_i
    float* sLse = reinterpret_cast<float*>(slot(i) + Tile::kOffLse);      // (Br) fp32: LSE_i
    float* sDelta = reinterpret_cast<float*>(slot(i) + Tile::kOffDelta);  // (Br) fp32: D_i
    //! [walk]

    //! [scores]
    // The warp's strips (16 keys, Br queries) of Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: element e of
    // tile n is key my_key[e / 2], query row0 + 8n + 2t + e % 2.
    float s_acc[kQN][4];   // (16, Br) fp32: Sᵀ, then Pᵀ
    float dp_acc[kQN][4];  // (16, Br) fp32: dPᵀ, then dSᵀ
    // Both accumulators were last touched by ordinary instructions (the last tile's recompute):
    // wgmma.fence first. The first k-step overwrites them (scale-d = 0).
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDK; ++kk) {  // k = d, 16 at a time: m64n64k16, all K-major
      wgmma_m64n64k16_ss<T, 0>(regs<32>(s_acc), desc<false, Bc>(sK, kk), desc<false, Br>(sQ, kk),
                               kk > 0);
      wgmma_m64n64k16_ss<T, 0>(regs<32>(dp_acc), desc<false, Bc>(sV, kk), desc<false, Br>(sdO, kk),
                               kk > 0);
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();  // synchronous: Sᵀ and dPᵀ are complete before the recompute
    ptx::wgmma_fence_operand(regs<32>(s_acc));
    ptx::wgmma_fence_operand(regs<32>(dp_acc));
    //! [scores]

    //! [recompute]
    // The mask as bounds on the tile's query r, 32-bit: key my_key[h] is seen by rows lo[h] <= r <
    // hi (causal_kv_end turned round: key j < Skv is seen by the rows i >= j + Sq − Skv, all rows
    // without the mask), in place of 09d's 64-bit bound per element, which at D = 128 pushed dK_j's
    // and dV_j's accumulators into local memory.
    const int hi = static_cast<int>(sh.sq - row0 < Br ? sh.sq - row0 : Br);
    int lo[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      std::int64_t first = kCausal ? my_key[h] + sh.sq - sh.skv : 0;  // the first row that sees it
      first = my_key[h] >= sh.skv ? sh.sq : (first < 0 ? 0 : first);
      lo[h] = static_cast<int>(first - row0 < 0 ? 0 : (first - row0 < Br ? first - row0 : Br));
    }
    // Pᵀ = exp(Sᵀ − LSE) and dSᵀ = Pᵀ ∘ (dPᵀ − D), in place, LSE and D indexed by the column
    // (the query). Masked elements — past the causal diagonal, past Skv, rows past Sq — are 0,
    // exactly as 09b.
#pragma unroll
    for (int n = 0; n < kQN; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 8 * n + 2 * t + e % 2;  // query of the tile
        float p = 0.0f, ds = 0.0f;
        if (lo[e / 2] <= r && r < hi) {
          p = expf(s_acc[n][e] * sh.scale - sLse[r]);  // a row that sees a key has a finite LSE
          ds = p * (dp_acc[n][e] - sDelta[r]);
        }
        s_acc[n][e] = p;
        dp_acc[n][e] = ds;
      }
    }
    //! [recompute]

    //! [dkdv]
    // dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i (scaled at the end): A from the accumulators, rounded
    // to the dtype (as the same-precision reference rounds P and dS), B = dO_i, Q_i MN-major.
    std::uint32_t pa[kQK][4], dsa[kQK][4];  // (64 keys, 16 queries) of Pᵀ and dSᵀ per k-step
#pragma unroll
    for (int kk = 0; kk < kQK; ++kk) {  // k = query, 16 at a time: n8 slices 2kk, 2kk + 1
      a_fragment<T>(pa[kk], s_acc, kk);
      a_fragment<T>(dsa[kk], dp_acc, kk);
    }
    // dS, as the dtype, for dQ: this thread's dSᵀ elements stored transposed (query rows), at
    // my_ds plus a constant (ds_at()).
#pragma unroll
    for (int n = 0; n < kQN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        my_ds[ds_at(n, e)] = from_f32<T>(dp_acc[n][e]);
    ptx::wgmma_fence();  // pa, dsa and (at the first tile) dk_acc, dv_acc: ordinary writes
#pragma unroll
    for (int kk = 0; kk < kQK; ++kk) {
      if constexpr (D == 64) {
        ptx::wgmma_m64n64k16_rs<T>(regs<32>(dv_acc), pa[kk], desc<true, Br>(sdO, kk), 1);
        ptx::wgmma_m64n64k16_rs<T>(regs<32>(dk_acc), dsa[kk], desc<true, Br>(sQ, kk), 1);
      } else {
        ptx::wgmma_m64n128k16_rs<T>(regs<64>(dv_acc), pa[kk], desc<true, Br>(sdO, kk), 1);
        ptx::wgmma_m64n128k16_rs<T>(regs<64>(dk_acc), dsa[kk], desc<true, Br>(sQ, kk), 1);
      }
    }
    ptx::wgmma_commit_group();
    // Synchronous: slot i % kStages (Q_i, dO_i) is free once every thread is past (C).
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(regs<4 * kDN>(dv_acc));
    ptx::wgmma_fence_operand(regs<4 * kDN>(dk_acc));
    ptx::wgmma_fence_operand(pa);
    ptx::wgmma_fence_operand(dsa);
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the dS stores, before dQ's wgmma
    // (C) Every warp's dS columns are in shared memory before the warpgroup's dQ reads them, and
    // every thread is done with slot i % kStages: dQ below reads only dS and K_j.
    __syncthreads();
    //! [dkdv]
    //! [refill]
    // Tile i + kStages goes into the slot tile i has just left; it flies during this tile's dQ
    // and the next kStages - 1 tiles.
    prefetch(i + Tile::kStages);
    //! [refill]

    //! [dq]
    // dQ_i += scale · dS_ij K_j: this block's share, added into the fp32 accumulator, 64 columns
    // (one column block of K_j, m64n64k16) at a time, so that at D = 128 only 32 of dQ's
    // accumulators are live beside dK_j's and dV_j's. The warp's accumulator rows are query rows
    // 16 warp + g (+ 8). Other blocks (the other K/V tiles of the head) add theirs to the same
    // elements at the same time: the adds must be atomic.
#pragma unroll
    for (int h = 0; h < D / 64; ++h) {
      float dq_acc[8][4];  // (64, 64) fp32: columns 64h .. 64h + 63 of dQ_i
      ptx::wgmma_fence();
#pragma unroll
      for (int kc = 0; kc < Tile::kCK; ++kc)  // k = key, 16 at a time; B = K_j's column block h
        wgmma_m64n64k16_ss<T, 1>(regs<32>(dq_acc), desc<false, Br>(sdS, kc),
                                 desc<true, Bc>(sK + h * Bc * 64, kc), kc > 0);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(regs<32>(dq_acc));
#pragma unroll
      for (int n = 0; n < 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t row = row0 + key0 + g + 8 * (e / 2);  // warp's rows, now queries
          if (row >= sh.sq) continue;
          const int d = 64 * h + 8 * n + 2 * t + e % 2;
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
// The fused kernel uses 59 and 107 KiB of dynamic shared memory (kernels.cuh): above 48 KiB a
// kernel must opt in, per function.
template <class T, int kD>
void allow_smem() {
  using Tile = BwdWgmmaTraits<T, kD>;
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
  using Tile = BwdWgmmaTraits<T, kD>;
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
  using Tile = BwdWgmmaTraits<T, kD>;
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

}  // namespace flashsteps::bwd_wgmma
