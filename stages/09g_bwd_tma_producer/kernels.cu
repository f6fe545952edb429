// =================================================================================================
// Stage 09g — the backward's TMA producer: warp 0 of stage 09f's second warpgroup, left free
// there, loads every tile the math warpgroup reads, by TMA into an mbarrier ring, as
// FlashAttention-3's backward does; the math warpgroup no longer issues a copy.
//
// What changed since stage 09f:
//  * One lane of warp kProducerWarp = 0 of warpgroup 1 (after its setmaxnreg.dec 24, beside the dQ
//    writer of warp 1) loads K_j and V_j once onto kv_full, then, for each query tile i, Q_i and
//    dO_i (3-D maps over [B*H, Sq, D], (64, 64) boxes, TMA's 128-byte swizzle: the layout 09f's
//    cp.async pieces were stored in) and LSE_i, D_i (2-D maps, (64, 1) boxes) into slot i % 2.
//  * Each slot has full[s] (count 1: the producer's arrive.expect_tx of the slot's 33,280 or
//    66,048 bytes; complete when TMA has delivered them) and empty[s] (count 128: each math thread
//    arrives once its dK/dV wgmmas, the slot's last readers, are waited for). The producer waits on
//    empty[s] before it re-arms full[s]: tile i + 2 is in flight while tile i's products run.
//  * The math warpgroup waits on full[s] where 09f waited for its cp.async group and fenced its
//    own writes for the async proxy (TMA writes through it, as wgmma reads): no fence, no copy
//    instruction, no address arithmetic for copies in the one warpgroup that computes.
//  * Rows past Sq or Skv: TMA's out-of-bounds fill writes zeros where 09f's threads stored them.
//    LSE's row stride (4·Sq bytes) is no multiple of 16, so the preprocess copies LSE, with D,
//    into rows of whole tiles in the workspace (0 past Sq), as FlashAttention-3's preprocess does.
// Unchanged: the walk, the five products, the recompute, the dQ partials and their writer, the
// setmaxnreg budgets (24 / 232) and the checks of them.
//
//! [prediction]
// Which metric should move (written before measuring, before any GPU run; H100/H200 SXM, fp16,
// S = 2048; SDPA's backends and 09f timed in the same run). 09f's ring already kept the next
// tile's loads in flight; what goes is their issue from the math warpgroup: per tile and thread
// 16 (D = 128) or 8 (D = 64) 16-byte cp.async with their addresses, 2 more for LSE and D, a commit,
// a wait and a proxy fence, all on the one warpgroup whose every instruction is on the critical
// path (a few percent of a tile's issue slots), and a few registers of addresses. The producer's
// handful of instructions per tile issue from another warpgroup. Shared memory grows by 40 bytes
// (2 and 1 blocks per SM, as 09f). So:
//  * against 09f: 1.0x to 1.12x at D = 64 and at D = 128, causal or not (never slower: the ring's
//    depth and the refill's point are 09f's);
//  * against SDPA's flash backward (FlashAttention-2): 0.8x to 1.8x at D = 64, 0.7x to 1.6x at
//    D = 128; against its cuDNN backward 0.5x to 1.3x at D = 64, 0.45x to 1.2x at D = 128;
//  * against FlashAttention-3's published backward (501 TFLOP/s, H100 SXM5, D = 128, S = 2k,
//    non-causal): 0.35x to 0.65x — one math warpgroup still idles the tensor cores through the
//    recompute;
//  * registers: 128 per thread at launch (the __launch_bounds__(256, 2) cap), no spill.
//! [prediction]
//
// Limits: compute capability 9.0 exactly (sm_90a: wgmma, setmaxnreg, TMA, the bulk reduce-add);
// D = 64 and 128, fp16 and bf16, causal or not, any Sq, Skv >= 1; Q, K, V and dO 16-byte aligned
// (TMA's rule); B·H·⌈Skv/64⌉ < 2^31 blocks; the fp32 accumulator, D and LSE's copy (padded to
// whole Br rows) must fit in device memory. dQ is not bitwise reproducible on a GPU; dK and dV
// are. Two of warpgroup 1's warps idle; the producer and the writer each use one lane. Next: the
// deterministic mode (09h, a child of this stage); a second math warpgroup (FlashAttention-3's
// two consumers) is still to come. The chapter: book/chapters/stage_09g_bwd_tma_producer.md.
// =================================================================================================
#include <cuda.h>  // CUtensorMap
#include <cuda/ptx>

#include <cfloat>
#include <cmath>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/cuda/tensor_map.cuh"
#include "flashsteps/cuda/watchdog.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::bwd_dq_writer {
namespace {

constexpr int kRowThreads = 256;  // the row kernels: one thread per row, element

//! [dq_layout]
// Where element (r, c) of query tile i's dQ_i lies in the accumulator's tile i (Br x D floats), in
// floats from the tile's start: column block c / 64 is one partial (Br x 64, one bulk reduce-add),
// and inside it the elements are in the order the math warpgroup holds them — thread 32w + 4g + t,
// register 4n + e of wgmma's accumulator (row 16w + g + 8(e / 2), column 8n + 2t + e % 2) at
// (128n + thread) x 4 + e — so that a thread stores its partial as float4s and a warp's float4s
// are 512 contiguous bytes, with no bank conflict. Only the preprocess and the conversion read this
// order; the reduce-add copies a partial as it lies.
template <int kBr>
__host__ __device__ __forceinline__ int dq_offset(int r, int c) {
  const int w = r / 16, g = r % 8, e = r % 16 / 8 * 2 + c % 2;  // warp, groupID, register
  const int n = c % 64 / 8, t = c % 8 / 2;                      // n8 slice, threadID_in_group
  return c / 64 * kBr * 64 + (128 * n + 32 * w + 4 * g + t) * 4 + e;
}
//! [dq_layout]

//! [dot_do_o]
// Row r of head bh's tiles (r < tr·kBr, past Sq included): its elements of dQ's accumulator set to
// 0 (the fused kernel only adds into it, whole tiles), and for r < Sq D[bh, r] = Σ_d dO[bh, r, d] ·
// O[bh, r, d] (09a's rowdot, summed in the same order) and LSE[bh, r] copied, both into rows of
// whole tiles (tr·kBr per head, 0 past Sq), which the producer's TMA reads a tile of at once.
template <class T, int kBr>
__global__ void dot_do_o_kernel(const T* __restrict__ dout, const T* __restrict__ o,
                                const float* __restrict__ lse, float* __restrict__ lse_pad,
                                float* __restrict__ dsum, float* __restrict__ dq_accum,
                                std::int64_t sq, int tr, std::int64_t rows, int d_head) {
  const std::int64_t row = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (row >= rows) return;
  const std::int64_t per_head = std::int64_t{tr} * kBr;  // rows of a head's tiles
  const std::int64_t bh = row / per_head, r = row % per_head;
  float* tile = dq_accum + row / kBr * kBr * d_head;  // tile (bh, r / kBr)
  for (int d = 0; d < d_head; ++d)
    tile[dq_offset<kBr>(static_cast<int>(r % kBr), d)] = 0.0f;
  if (r >= sq) {
    lse_pad[row] = 0.0f;  // read by TMA, masked in the recompute
    dsum[row] = 0.0f;
    return;
  }
  const T* doi = dout + (bh * sq + r) * d_head;  // (D) row of dO
  const T* oi = o + (bh * sq + r) * d_head;      // (D) row of O
  float acc = 0.0f;
  for (int d = 0; d < d_head; ++d)
    acc += to_f32(doi[d]) * to_f32(oi[d]);
  lse_pad[row] = lse[bh * sq + r];
  dsum[row] = acc;
}
//! [dot_do_o]

// Waits until the mbarrier's phase with parity `parity` has completed (07c's wait: try_wait
// suspends the thread for a while before returning false). `name`, `slot` label the watchdog.
__device__ __forceinline__ void wait_parity(std::uint64_t* bar, std::uint32_t parity,
                                            const char* name, int slot) {
  const watchdog::Spin spin;
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
    spin.check(name, slot, parity);
  }
}

// The math warpgroup's barrier (bar.sync 1, 128 threads): __syncthreads() would wait for the
// writer's warpgroup too, which is in its own loop.
constexpr int kBarMath = 1;

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
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocksPerSm)
    fused_backward_kernel(const __grid_constant__ CUtensorMap tm_q,
                          const __grid_constant__ CUtensorMap tm_k,
                          const __grid_constant__ CUtensorMap tm_v,
                          const __grid_constant__ CUtensorMap tm_do,
                          const __grid_constant__ CUtensorMap tm_lse,
                          const __grid_constant__ CUtensorMap tm_dsum, float* __restrict__ dq_accum,
                          T* __restrict__ dk, T* __restrict__ dv, Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc, kThreads = Tile::kMathThreads;
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
  float* sdQ = reinterpret_cast<float*>(smem + Tile::kOffDQ);  // kDqBufs x (Br, 64) fp32: dQ_i
  auto* dq_full = reinterpret_cast<std::uint64_t*>(smem + Tile::kOffBar);  // a partial is written
  std::uint64_t* dq_empty = dq_full + Tile::kDqBufs;  // its reduce-add has read it
  std::uint64_t* full = dq_empty + Tile::kDqBufs;     // full[s]: slot s's bytes have landed
  std::uint64_t* empty = full + Tile::kStages;        // empty[s]: no math thread reads slot s
  std::uint64_t* kv_full = empty + Tile::kStages;     // K_j and V_j have landed
  const int i_first = first_query_tile<Br, kCausal>(kv0, sh);
  const int tr = static_cast<int>((sh.sq + Br - 1) / Br);

  //! [roles]
  // dq_full[b]: the 128 math threads arrive once their share of a partial is in buffer b;
  // dq_empty[b]: the writer arrives once its reduce-add has read buffer b. Partial u (tile
  // i_first + u / (D / 64), columns 64 (u % (D / 64)) ..) uses buffer u % kDqBufs and phase
  // u / kDqBufs of its barriers; a wait on parity 1 of a fresh barrier returns at once (the
  // phase before phase 0), so the first kDqBufs partials find their buffers free.
  if (threadIdx.x == 0) {
    for (int b = 0; b < Tile::kDqBufs; ++b) {
      cuda::ptx::mbarrier_init(&dq_full[b], Tile::kMathThreads);
      cuda::ptx::mbarrier_init(&dq_empty[b], 1);
    }
    for (int s = 0; s < Tile::kStages; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], Tile::kMathThreads);
    }
    cuda::ptx::mbarrier_init(kv_full, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();  // the kernel's only barrier of all 256 threads: the mbarriers are initialized
  // The warpgroup, broadcast from lane 0 so that ptxas sees it warp-uniform (07c: wgmma under a
  // branch it thinks divergent is serialized).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kThreads, 0);
  if (warpgroup == 1) {
    // Warpgroup 1 gives its registers back (all 4 warps execute setmaxnreg); one lane of warp
    // kWriterWarp is the dQ writer. Budgets: 128 at launch (__launch_bounds__(256, 2)) -> 128 x 24
    // + 128 x 232 = 32,768, a block's half of the SM's 65,536.
    ptx::setmaxnreg_dec<Tile::kWriterRegs>();
    if (threadIdx.x == kThreads + 32 * Tile::kProducerWarp) {
      //! [producer]
      // K_j and V_j once, on kv_full; then tile i into slot i % kStages, phase (i - i_first) /
      // kStages, once the math threads have left the slot's last tile (a fresh empty barrier's
      // parity 1 counts as complete: the first kStages tiles go at once). Every box is (64
      // columns, 64 rows) of a head, rows past Sq or Skv zero-filled by TMA and counted in the
      // bytes; LSE_i and D_i are 64 floats of the preprocess's padded rows (0 past Sq). A block
      // with no tile copies nothing: no copy may outlive it, and every copy issued here is
      // waited for by the math warpgroup.
      if (i_first < tr) {
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, kv_full,
                                             static_cast<std::uint32_t>(Tile::kKVTxBytes));
        for (int c = 0; c < D / 64; ++c) {
          const std::int32_t at[3] = {64 * c, static_cast<std::int32_t>(kv0),
                                      static_cast<std::int32_t>(bh)};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          sK + c * Bc * 64, &tm_k, at, kv_full);
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          sV + c * Bc * 64, &tm_v, at, kv_full);
        }
      }
      for (int i = i_first; i < tr; ++i) {
        const int s = i % Tile::kStages;
        const auto n = static_cast<std::uint32_t>((i - i_first) / Tile::kStages);
        wait_parity(&empty[s], (n & 1u) ^ 1u, "empty", s);
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, &full[s],
                                             static_cast<std::uint32_t>(Tile::kSlotTxBytes));
        for (int c = 0; c < D / 64; ++c) {
          const std::int32_t at[3] = {64 * c, i * Br, static_cast<std::int32_t>(bh)};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          slot(i) + Tile::kOffQ + c * Br * 128, &tm_q, at,
                                          &full[s]);
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          slot(i) + Tile::kOffDO + c * Br * 128, &tm_do, at,
                                          &full[s]);
        }
        const std::int32_t row[2] = {i * Br, static_cast<std::int32_t>(bh)};
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                        slot(i) + Tile::kOffLse, &tm_lse, row, &full[s]);
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                        slot(i) + Tile::kOffDelta, &tm_dsum, row, &full[s]);
      }
      return;
      //! [producer]
    }
    if (threadIdx.x != kThreads + 32 * Tile::kWriterWarp) return;
    //! [writer]
    // Partial u: wait until the math warpgroup has written it, add it into the accumulator's tile
    // with one bulk reduce-add (Br x 64 fp32, contiguous on both sides), and give the buffer back
    // once the reduce has read it — cp.async.bulk.wait_group.read: the source is read, the adds
    // may still be on their way to global memory, which no one here reads before the kernel ends.
    int u = 0;
    for (int i = i_first; i < tr; ++i) {
      float* tile = dq_accum + (bh * tr + i) * Br * D;  // (Br, D) fp32, dq_offset()'s order
      for (int h = 0; h < D / 64; ++h, ++u) {
        const int b = u % Tile::kDqBufs;
        wait_parity(&dq_full[b], static_cast<std::uint32_t>(u / Tile::kDqBufs) & 1u, "dq_full", b);
        cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                        cuda::ptx::op_add, tile + h * Br * 64, sdQ + b * Br * 64,
                                        static_cast<std::uint32_t>(Tile::kDqBufBytes));
        cuda::ptx::cp_async_bulk_commit_group();
        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});  // buffer b is read
        cuda::ptx::mbarrier_arrive(&dq_empty[b]);
      }
    }
    // Every add applied before the thread exits: the conversion kernel reads them.
    cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});
    return;
    //! [writer]
  }
  ptx::setmaxnreg_inc<Tile::kMathRegs>();
  //! [roles]

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

  // The warp's strips of dK_j and dV_j, (16 keys, D) fp32 as D/8 accumulator tiles (16, 8):
  // element e of tile n is key my_key[e / 2], column 8n + 2t + e % 2.
  float dk_acc[kDN][4] = {};  // dK_j / scale
  float dv_acc[kDN][4] = {};  // dV_j

  //! [walk]
  for (int i = i_first; i < tr; ++i) {
    const std::int64_t row0 = std::int64_t{i} * Br;  // first row of Q_i
    //! [full_wait]
    // Tile i has landed in slot i % kStages: the phase (i - i_first) / kStages of full[s] completes
    // when TMA has delivered every byte the producer announced. At the first tile K_j and V_j too.
    // TMA writes through the async proxy, which wgmma reads through: no proxy fence.
    if (i == i_first) wait_parity(kv_full, 0u, "kv_full", 0);
    wait_parity(&full[i % Tile::kStages],
                static_cast<std::uint32_t>((i - i_first) / Tile::kStages) & 1u, "full",
                i % Tile::kStages);
    //! [full_wait]
    // (A) Every thread has waited for the last tile's dQ wgmmas, which read dS_ij.
    ptx::named_barrier_sync(kBarMath, kThreads);
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
    // Synchronous: this thread's reads of slot i % kStages (Q_i, dO_i by wgmma, LSE_i and D_i in
    // the recompute) are over; the producer refills the slot once all 128 have said so.
    ptx::wgmma_wait_group<0>();
    //! [empty_arrive]
    cuda::ptx::mbarrier_arrive(&empty[i % Tile::kStages]);
    //! [empty_arrive]
    ptx::wgmma_fence_operand(regs<4 * kDN>(dv_acc));
    ptx::wgmma_fence_operand(regs<4 * kDN>(dk_acc));
    ptx::wgmma_fence_operand(pa);
    ptx::wgmma_fence_operand(dsa);
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the dS stores, before dQ's wgmma
    // (C) Every warp's dS columns are in shared memory before the warpgroup's dQ reads them.
    ptx::named_barrier_sync(kBarMath, kThreads);
    //! [dkdv]

    //! [dq]
    // dQ_i += scale · dS_ij K_j: this block's share, 64 columns (one column block of K_j,
    // m64n64k16) at a time, so that at D = 128 only 32 of dQ's accumulators are live beside dK_j's
    // and dV_j's. Each 64 columns are one partial for the writer: stored into buffer b in
    // dq_offset()'s order (this thread's registers as 8 float4s), made visible to the async proxy
    // the reduce-add reads through, and announced on dq_full[b].
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
      const int u = (i - i_first) * (D / 64) + h, b = u % Tile::kDqBufs;
      // Buffer b is free once the reduce-add of its last partial (u - kDqBufs) has read it.
      wait_parity(&dq_empty[b], (static_cast<std::uint32_t>(u / Tile::kDqBufs) & 1u) ^ 1u,
                  "dq_empty", b);
      float4* to = reinterpret_cast<float4*>(sdQ + b * Br * 64) + tid;
#pragma unroll
      for (int n = 0; n < 8; ++n)
        to[128 * n] = make_float4(dq_acc[n][0] * sh.scale, dq_acc[n][1] * sh.scale,
                                  dq_acc[n][2] * sh.scale, dq_acc[n][3] * sh.scale);
      cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the stores, before the reduce
      cuda::ptx::mbarrier_arrive(&dq_full[b]);
    }
    //! [dq]
  }

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
// dQ = the accumulator, rounded to the dtype, once every block has added its share: element (bh,
// r, d) from tile (bh, r / kBr) at dq_offset(r % kBr, d).
template <class T, int kBr>
__global__ void convert_dq_kernel(const float* __restrict__ dq_accum, T* __restrict__ dq,
                                  std::int64_t n, std::int64_t sq, int tr, int d_head) {
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = idx / d_head, bh = row / sq, r = row % sq;
    const float* tile = dq_accum + (bh * tr + r / kBr) * kBr * d_head;
    dq[idx] = from_f32<T>(tile[dq_offset<kBr>(static_cast<int>(r % kBr), idx % d_head)]);
  }
}
//! [convert_dq]

}  // namespace

std::int64_t workspace_bytes(const Shape& sh, std::int64_t head_dim) {
  constexpr int kBr = BwdDqWriterTraits<__half, 64>::Br;  // the same at every head dim and dtype
  return 4 * sh.bh * ((sh.sq + kBr - 1) / kBr * kBr) * (head_dim + 2);
}

//! [stats_map]
// The 2-D map over a row statistic (LSE or D) in the workspace, (B*H, rows) fp32 with rows = tr·Br
// per head, that the producer reads a tile's Br of with one (Br, 1) box. Padded by the preprocess:
// the user's (B*H, Sq) LSE has a row stride of 4·Sq bytes, which TMA takes only as a multiple
// of 16.
CUtensorMap make_stats_map(const float* base, std::int64_t bh, std::int64_t rows, int box) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(bh)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(rows) * sizeof(float)};
  const cuuint32_t box_dims[2] = {static_cast<cuuint32_t>(box), 1}, elem_strides[2] = {1, 1};
  CUtensorMap map{};
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(base), dims, strides, box_dims,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("cuTensorMapEncodeTiled failed for a row statistic (CUresult " +
                             std::to_string(static_cast<int>(r)) + ")");
  return map;
}
//! [stats_map]

//! [configure]
// The fused kernel uses 91 and 139 KiB of dynamic shared memory (kernels.cuh): above 48 KiB a
// kernel must opt in, per function.
template <class T, int kD>
void allow_smem() {
  using Tile = BwdDqWriterTraits<T, kD>;
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
  using Tile = BwdDqWriterTraits<T, kD>;
  const int tr = static_cast<int>((sh.sq + Tile::Br - 1) / Tile::Br);
  const std::int64_t padded = sh.bh * tr * Tile::Br;   // rows of the accumulator's tiles
  float* dq_accum = static_cast<float*>(a.workspace);  // (B*H, tr) tiles of (Br, D) fp32
  float* dsum = dq_accum + padded * kD;                // (B*H, tr*Br) fp32: D
  float* lse_pad = dsum + padded;                      // (B*H, tr*Br) fp32: LSE
  const auto* o = static_cast<const T*>(a.o);
  const auto* dout = static_cast<const T*>(a.dout);
  const std::int64_t rows = sh.bh * sh.sq, tc = (sh.skv + Tile::Bc - 1) / Tile::Bc;
  // The producer's maps (host-side encoding only): (64, 64) boxes of Q, dO, K, V per head, 64
  // floats of LSE and D.
  const int sq = static_cast<int>(sh.sq), skv = static_cast<int>(sh.skv);
  const CUtensorMap tm_q = make_tensor_map<T>(a.q, sh.bh, sq, kD, Tile::Br);
  const CUtensorMap tm_k = make_tensor_map<T>(a.k, sh.bh, skv, kD, Tile::Bc);
  const CUtensorMap tm_v = make_tensor_map<T>(a.v, sh.bh, skv, kD, Tile::Bc);
  const CUtensorMap tm_do = make_tensor_map<T>(a.dout, sh.bh, sq, kD, Tile::Br);
  const CUtensorMap tm_lse = make_stats_map(lse_pad, sh.bh, std::int64_t{tr} * Tile::Br, Tile::Br);
  const CUtensorMap tm_dsum = make_stats_map(dsum, sh.bh, std::int64_t{tr} * Tile::Br, Tile::Br);
  //! [enqueue]
  FS_CUDA_CHECK(launch_kernel(dot_do_o_kernel<T, Tile::Br>, grid_size(padded, kRowThreads, padded),
                              kRowThreads, 0, stream, dout, o, static_cast<const float*>(a.lse),
                              lse_pad, dsum, dq_accum, sh.sq, tr, padded, kD));
  FS_CUDA_CHECK(launch_kernel(fused_backward_kernel<T, Tile, kCausal>,
                              static_cast<unsigned>(sh.bh * tc), Tile::kThreads, Tile::kSmemBytes,
                              stream, tm_q, tm_k, tm_v, tm_do, tm_lse, tm_dsum, dq_accum,
                              static_cast<T*>(a.dk), static_cast<T*>(a.dv), sh));
  FS_CUDA_CHECK(launch_kernel(
      convert_dq_kernel<T, Tile::Br>, grid_size(rows * kD, kRowThreads, std::int64_t{1} << 20),
      kRowThreads, 0, stream, dq_accum, static_cast<T*>(a.dq), rows * kD, sh.sq, tr, kD));
  //! [enqueue]
}

template <class T, int kD, bool kCausal>
std::vector<KernelLaunchInfo> kernel_list(const Shape&) {
  using Tile = BwdDqWriterTraits<T, kD>;
  const std::string tag =
      "<d" + std::to_string(kD) + "," + dtype_name<T>() + (kCausal ? ",causal>" : ">");
  return {
      {"dot_do_o" + tag, reinterpret_cast<const void*>(&dot_do_o_kernel<T, Tile::Br>), kRowThreads,
       0},
      {"fused_backward" + tag,
       reinterpret_cast<const void*>(&fused_backward_kernel<T, Tile, kCausal>), Tile::kThreads,
       Tile::kSmemBytes},
      {"convert_dq" + tag, reinterpret_cast<const void*>(&convert_dq_kernel<T, Tile::Br>),
       kRowThreads, 0},
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

}  // namespace flashsteps::bwd_dq_writer
