// =================================================================================================
// Stage 07d — overlap: 07c's consumers issue tile j's S with tile j-1's P V and take turns on the
// tensor cores (FlashAttention-3's two overlaps, in the measured kernel's form).
//
// What changed since stage 07c (its parent): the producer, the ring, the descriptors, the softmax
// and the TMA store are 07c's; the order in which a consumer issues its work changed:
//  * Tile j's S = Q K_j^T and tile j-1's O += P_{j-1} V_{j-1} are issued together (two commit
//    groups); wgmma.wait_group<1> waits for S_j only, so the softmax of S_j may run while P V
//    still runs; wait_group<0> then frees P and stage j-1, whose empty barrier is released one
//    tile later than in 07c. The last tile's P V is issued after the loop; tile 0 issues S only.
//  * Ping-pong: two named barriers (kBarTurn + cw) make the consumers take turns issuing their
//    wgmmas, so one's softmax falls under the other's products.
// This kernel is the one the committed run measured as 07_hopper, and it stays PTX-identical to it
// (tests/kernel-identity.sh; fs_table identity). So the diff also carries what that kernel had and
// 07c does not: the names in its mangled name (namespace hopper, HopperTraits), separate K and V
// rings, the producer's copies in its own branch (Q_i after setmaxnreg, K_j and V_j inline rather
// than through 07c's prefetch()), and the consumers' index arithmetic and epilogue in the measured
// form (07c's names, the measured expressions).
//
// 07c's header predicts this step against 07c (1.05-1.25x at D = 128, 1.1-1.3x at D = 64, S >= 2k;
// no run has measured 07c). The prediction below is older: it was written against stage 06, before
// the series was split, and the committed run judges it (book/chapters/stage_07d_overlap.md).
//! [prediction]
// Which metric should move, and by how much (written before measuring; H100 SXM: 132 SMs, ~1.83
// GHz, dense fp16/bf16 wgmma peak 989 TFLOP/s; the bench's "measured peak" is a large cuBLAS GEMM,
// typically ~700-750 TFLOP/s there):
//  * Tensor pipe: `sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active` (0 in
//    stage 06, which ran HMMA): 60-70% at D = 128 and 40-50% at D = 64 (non-causal, S >= 2k); at
//    D = 128 the tensor pipe is the bound, at D = 64 MUFU and tensor are even.
//  * Throughput, fp16, S >= 2k, non-causal: D = 128 ~500-600 TFLOP/s (~70-80% of the measured
//    GEMM peak), D = 64 ~350-420. Vs SDPA's flash backend (FA2, same run) 1.4-1.7x; vs cuDNN SDPA
//    (same run) parity at best, more likely 5-15% below. Causal: 10-20% fewer TFLOP/s.
//  * Short S (512-1k): 0.6-0.8x of the long-S rate.
//  * Stage 06 -> 07 latency at D = 128, S >= 2k: 1.5-1.8x faster.
//  * Resources: ptxas reports 168 registers (the __launch_bounds__(384, 1) cap; setmaxnreg then
//    moves them: producer 24, consumers 240), 0 spills; SASS has HGMMA and no HMMA, UTMALDG for the
//    loads, UTMASTG for the store, SYNCS.* for the mbarriers.
//! [prediction]
//
// Limits: compute capability 9.0 exactly (sm_90a: wgmma, setmaxnreg); D = 64 and 128; fp16 and
// bf16; causal or not; any Sq, Skv >= 1; Q, K, V, O 16-byte aligned (TMA's rules); B*H*Tr < 2^31
// blocks; one block per SM, no clusters. ptxas 13.0 hoists the P V wait above the exp2s, so only
// the ping-pong overlaps softmax with tensor work in the compiled kernel (08a's step). K released
// with V; no persistent grid, no TMA multicast, no FP8; unconditional O rescale. The reasoning:
// book/chapters/stage_07d_overlap.md.
// =================================================================================================
#include <cuda.h>  // CUtensorMap and its enums (header only: the encoder comes via the runtime)
#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "flashsteps/cuda/watchdog.cuh"
#include "flashsteps/mask.hpp"
#include "kernels.cuh"

namespace flashsteps::hopper {
namespace {

// The named barriers (bar.sync / bar.arrive ids; 0 is __syncthreads()'s), one meaning per id:
// one per consumer warpgroup c = 0, 1, and consumer c's barrier is kBarTurn + c, kBarStore + c.
enum NamedBarrier : int {
  kBarTurn = 1,            // consumer 0's turn to issue its wgmmas (256 threads: both consumers)
  kBarTurnConsumer1 = 2,   // consumer 1's turn to issue its wgmmas (256 threads: both consumers)
  kBarStore = 3,           // consumer 0's staged O is complete (128 threads: its warpgroup)
  kBarStoreConsumer1 = 4,  // consumer 1's staged O is complete (128 threads: its warpgroup)
};
static_assert(kBarTurnConsumer1 == kBarTurn + 1 && kBarStoreConsumer1 == kBarStore + 1,
              "consumer c's barrier is the first id + c");
static_assert(kBarStoreConsumer1 < 16, "a block has 16 named barriers, ids 0 to 15");

//! [barriers]
// Waits until the mbarrier's phase with parity `parity` has completed. mbarrier.try_wait.parity
// (cuda::ptx) suspends the thread in hardware for a while before returning false; loop until true.
// `name` and `slot` only label the watchdog's message in test builds
// (flashsteps/cuda/watchdog.cuh).
__device__ __forceinline__ void wait_parity(std::uint64_t* bar, std::uint32_t parity,
                                            const char* name, int slot) {
  const watchdog::Spin spin;
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
    spin.check(name, slot, parity);
  }
}
//! [barriers]

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
// TMA's 128-byte swizzle (CU_TENSOR_MAP_SWIZZLE_128B) writes this layout itself: only the
// epilogue computes it now. At D = 64 that is 06c's layout exactly; D = 128 is two column blocks,
// (rows, 0..63) and (rows, 64..127), one after the other (06c kept a row's 256 bytes together). The
// conflict analysis is 06c's: 8 threads copying the 8 chunks of a row, or 8 lanes storing one chunk
// of 8 rows, hit 8 different 4-bank groups.
//
// SW128 by its address bits (PTX ISA, "Tensors: Swizzling Modes", the 128-byte mode; the
// descriptor's mode 1 is the same): in an atom aligned to 1024 bytes, the byte at linear offset a
// is stored at a ^ (((a >> 7) & 7) << 4). Bits 4-6 (which 16-byte chunk of a 128-byte line) are
// XORed with bits 7-9 (which line of the atom). Three key bits permute 2^3 = 8 chunks: the
// pattern is 8 x 16 = 128 bytes wide, and repeats after 8 lines, 1024 bytes. So it is the
// picture above only when a row is one line, 128 bytes = 64 fp16/bf16: hence the column blocks.
// 06c at D = 128 keys its XOR on r % 8, address bits 8-10 of its 256-byte rows; SW128 would key
// line 2r + h (h: the row's first or second half) on (2r + h) % 8, a different permutation.
__device__ __forceinline__ std::uint32_t swizzled_offset(int r, int col) {  // in bytes
  return static_cast<std::uint32_t>(r * 128 + (((col / 8) ^ (r % 8)) * 16) + (col % 8) * 2);
}
//! [swizzle]

//! [ownership]
// Who owns what. Each consumer warpgroup owns a 64-row strip of Q_i; wgmma's accumulator
// layout gives warp w rows 16w .. 16w + 15, and inside them, per n8 slice of columns, exactly the
// mma.m16n8k16 C layout of stage 06c: lane 4g + t (g = lane / 4, t = lane % 4) holds rows 16w + g
// and 16w + g + 8, columns 2t and 2t + 1. Element 4n + e of an accumulator array is row
// 16w + g + 8 (e / 2), column 8n + 2t + (e % 2):
//
//   S_ij, P_ij (64, Bc): Bc/8 n8 slices x 4 = Bc/2 fp32 registers per thread
//   O_i        (64, D):  D/8 n8 slices x 4  = D/2 fp32 registers per thread
//
// A row is still spread over the 4 lanes of a quad: its max and sum are two __shfl_xor_sync away.
// Shared between warps: Q_i (each consumer's wgmmas read its own 64 rows) and the K_j / V_j
// ring, which both consumers read. Thread 0, in the producer warpgroup, issues every copy.
//! [ownership]

// clang-format off
//! [ring]
// The ring, kStages stages (tile j in stage j % kStages), as in stage 07b, but the producer no
// longer meets the consumers at a block barrier (A): an empty barrier per stage tells it that both
// consumers are done with a stage.
//
//   k_full[s], v_full[s]  count 1: thread 0's arrive.expect_tx(bytes of K_j / V_j); the phase
//                         completes when TMA has also delivered that many bytes (complete_tx).
//   empty[s]              count 256: every consumer thread arrives once it has waited for the
//                         wgmmas that read V_j (and K_j) — the stage may be overwritten.
//   q_full                count 1, one phase: Q_i.
// Tile j uses phase n = j / kStages of its stage's barriers; waiters pass the parity n & 1 (a
// barrier never runs two phases ahead of a waiter: the producer waits on empty before re-arming
// full, the consumers wait on full before arriving on empty). The producer's first pass over the
// ring waits on parity 1 of a fresh empty barrier, which counts as complete ("the phase before
// phase 0"), so it starts without a handshake.
//
//   producer:  wait empty[s] (n&1)^1 -> expect_tx k_full[s], TMA K_j
//                                   -> expect_tx v_full[s], TMA V_j
//   consumer:  wait k_full[s] n&1 -> S_j = Q K_j^T ... (next tile) wait v_full[s] n&1 ->
//              O += P_j V_j -> wgmma.wait_group<0> -> arrive empty[s]
//! [ring]
// clang-format on

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocksPerSm)
    fused_attention_kernel(const __grid_constant__ CUtensorMap tm_q,
                           const __grid_constant__ CUtensorMap tm_k,
                           const __grid_constant__ CUtensorMap tm_v,
                           const __grid_constant__ CUtensorMap tm_o, float* __restrict__ lse,
                           Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc;
  constexpr int kStages = Tile::Stages;
  constexpr int kSN = Tile::kSN, kON = Tile::kON;

  FS_DYNAMIC_SHARED(unsigned char, smem_raw);
  // Round the base up to 1024 bytes: swizzle atoms, TMA's 128B-swizzled boxes and the wgmma
  // descriptors (base offset 0) all assume it. kSmemBytes includes the slack.
  unsigned char* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  T* sQ = reinterpret_cast<T*>(smem + Tile::kOffQ);  // (Br, D) dtype, swizzled: Q_i, then O_i / l
  // Stage s: K_j (Bc, D) dtype in the K ring, V_j (Bc, D) dtype in the V ring, both swizzled.
  auto stage_k = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffK + s * Tile::kKVBytes);
  };
  auto stage_v = [&](int s) {
    return reinterpret_cast<T*>(smem + Tile::kOffV + s * Tile::kKVBytes);
  };
  auto* bars = reinterpret_cast<std::uint64_t*>(smem + Tile::kOffBar);
  std::uint64_t* q_full = bars;
  std::uint64_t* k_full = bars + 1;
  std::uint64_t* v_full = bars + 1 + kStages;
  std::uint64_t* empty = bars + 1 + 2 * kStages;

  // One block per (head, query block), the query blocks of a head adjacent in launch order (they
  // share K, V through L2); inside a head the last query block first (the longest under a causal
  // mask), as in stage 06c.
  const int i = sh.tr - 1 - static_cast<int>(blockIdx.x % static_cast<unsigned>(sh.tr));
  const int bh = static_cast<int>(blockIdx.x / static_cast<unsigned>(sh.tr));  // b*H + h
  const int row0 = i * Br;                                                     // first row of Q_i

  // Tiles the block visits: 0 .. Tc_i-1, the last Tc_i - Tc_full of them masked (they cross the
  // causal diagonal or Skv), as in stage 06c.
  const int last_row = min(row0 + Br, sh.sq) - 1;
  const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, sh.skv, kCausal));
  const int Tc_i = (kv_stop + Bc - 1) / Bc;  // tiles visited; 0 when no row sees a key
  const int kv_full = static_cast<int>(causal_kv_end(row0, sh.sq, sh.skv, kCausal));
  const int Tc_full = kv_full / Bc;  // tiles 0 .. Tc_full-1 need no mask (<= Tc_i)

  //! [barriers_init]
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      cuda::ptx::mbarrier_init(&k_full[s], 1);
      cuda::ptx::mbarrier_init(&v_full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], Tile::kConsumerThreads);
    }
    // Makes the initializations visible to the async proxy (the TMA unit's complete_tx).
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  // The kernel's only block-wide barrier: initialized barriers before any role touches them.
  __syncthreads();
  //! [barriers_init]

  // The warpgroup index, broadcast from lane 0: the same value, but one the compiler can prove is
  // warp-uniform. ptxas serializes wgmma that sit under a branch it considers divergent (C7520),
  // and a value computed from threadIdx.x is divergent to it.
  const int warpgroup =
      __shfl_sync(kFullMask, static_cast<int>(threadIdx.x) / Tile::kWarpgroupThreads, 0);
  //! [setmaxnreg]
  if (warpgroup == 0) {
    // The producer warpgroup: 4 warps, of which one thread works. Its registers go back to the
    // block's pool (all 4 warps must execute setmaxnreg); each consumer warpgroup takes its share
    // with setmaxnreg_inc<kConsumerRegs> right after this branch. Budgets: 168 at entry (the
    // __launch_bounds__(384, 1) cap) -> 128 x 24 + 256 x 240 = 64,512 of the SM's 65,536.
    ptx::setmaxnreg_dec<Tile::kProducerRegs>();
    //! [setmaxnreg]
    //! [producer]
    // Q_i first, one (Br, 64) box per column block (rows >= Sq zero-filled; row0 < Sq keeps the
    // box partly in bounds), then tile j into stage j % kStages once both consumers are done with
    // tile j - kStages: the producer runs up to kStages tiles ahead, with no barrier shared with
    // the consumers. A block that visits no tile copies nothing: no copy may outlive the block,
    // and no thread would wait for one. (07c copies Q_i before the roles part; the measured kernel
    // copies it here, after setmaxnreg.)
    if (threadIdx.x == 0 && Tc_i > 0) {
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, q_full,
                                           static_cast<std::uint32_t>(Tile::kQBytes));
#pragma unroll
      for (int c = 0; c < D / Tile::kBlockCols; ++c) {
        const std::int32_t coords[3] = {c * Tile::kBlockCols, row0, bh};
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                        sQ + c * Br * Tile::kBlockCols, &tm_q, coords, q_full);
      }
      for (int j = 0; j < Tc_i; ++j) {
        wait_parity(&empty[j % kStages], (static_cast<std::uint32_t>(j / kStages) & 1u) ^ 1u,
                    "empty", j % kStages);
        //! [pipeline]
        // The copies of K_j and V_j into stage j % kStages: K_j then V_j, (Bc, 64) boxes at (col,
        // key row, head), each barrier armed with its bytes first. Keys >= Skv lie outside the
        // tensor: zero-filled and counted in the bytes, as for any partly out-of-bounds box (j <
        // Tc_i keeps every box partly in bounds). (07c calls them prefetch(j); the measured
        // kernel has them here.)
        const int s = j % kStages;
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, &k_full[s],
                                             static_cast<std::uint32_t>(Tile::kKVBytes));
#pragma unroll
        for (int c = 0; c < D / Tile::kBlockCols; ++c) {
          const std::int32_t coords[3] = {c * Tile::kBlockCols, j * Bc, bh};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          stage_k(s) + c * Bc * Tile::kBlockCols, &tm_k, coords,
                                          &k_full[s]);
        }
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, &v_full[s],
                                             static_cast<std::uint32_t>(Tile::kKVBytes));
#pragma unroll
        for (int c = 0; c < D / Tile::kBlockCols; ++c) {
          const std::int32_t coords[3] = {c * Tile::kBlockCols, j * Bc, bh};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          stage_v(s) + c * Bc * Tile::kBlockCols, &tm_v, coords,
                                          &v_full[s]);
        }
        //! [pipeline]
      }
    }
    // Nothing to wait for: every copy issued here is consumed (waited on) by the consumers before
    // they finish, so none outlives the block.
    return;
    //! [producer]
  }
  ptx::setmaxnreg_inc<Tile::kConsumerRegs>();

  const int cw = warpgroup - 1;  // consumer 0 or 1: Q_i rows 64 cw .. 64 cw + 63
  const int tid = static_cast<int>(threadIdx.x) % Tile::kWarpgroupThreads;  // in its warpgroup
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;  // groupID, threadID_in_group (see the ownership picture)
  // This thread's two rows: h = 0 is strip row g, h = 1 is strip row g + 8, of this warp's 16
  // rows of the consumer's 64 (strip_row) and of Q_i (my_row). Rows >= Sq (ragged last block)
  // are computed on zero-filled Q and never stored.
  const int strip_row[2] = {Tile::kWarpRows * warp + g, Tile::kWarpRows * warp + g + 8};
  const int my_row[2] = {row0 + cw * Tile::kConsumerRows + strip_row[0],
                         row0 + cw * Tile::kConsumerRows + strip_row[1]};
  // Keys [0, kv_end) are visible to a row: the causal diagonal and Skv in one bound.
  const int kv_end[2] = {static_cast<int>(causal_kv_end(my_row[0], sh.sq, sh.skv, kCausal)),
                         static_cast<int>(causal_kv_end(my_row[1], sh.sq, sh.skv, kCausal))};

  //! [descriptors]
  // wgmma matrix descriptors (ptx.cuh, wgmma_desc_sw128). All three operands are 128B-swizzled
  // column blocks of 64 columns; a 16-wide k step is 32 bytes along a row (K-major Q, K) or 16
  // rows = 2,048 bytes down the block (MN-major V).
  //   A = Q (64, D), K-major: this consumer's 64 rows of column block kk / 4, + 32 B per k16
  //       step inside it.
  //   B = K_j (Bc, D) read as K^T: "N x K, K-major" — no transpose: column block kk / 4, + 32 B.
  //   B = V_j (Bc, D) = (k, n) with n contiguous: MN-major (imm-tnsp-b = 1); k16 step kk starts
  //       at row 16 kk; the next 64 columns of n (D = 128) are the next column block: LBO.
  // The stride byte offset of all three is one atom (8 rows x 128 B): the next 8 rows of M or N
  // (Q, K) or of K (V).
  const std::uint32_t q_base =  // this consumer's 64 rows
      ptx::smem_addr(sQ) +
      static_cast<std::uint32_t>(cw * Tile::kConsumerRows * Tile::kSwizzleBytes);
  auto q_desc = [&](int kk) {  // k16 step kk of D
    return ptx::wgmma_desc_sw128(
        q_base + static_cast<std::uint32_t>((kk / 4) * Tile::kQBlockBytes + (kk % 4) * 32), 16,
        Tile::kAtomBytes);
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
  // P of the previous tile, kept from one tile to the next: its P V is issued with the next S.
  std::uint32_t p_frag[Tile::kPV][4];  // (64, Bc) dtype P strip: Bc/16 register A operands

  if (Tc_i > 0) wait_parity(q_full, 0, "q_full", 0);
  //! [pingpong]
  // Consumer 0 goes first: consumer 1 opens consumer 0's turn barrier once. Afterwards each
  // consumer, after issuing its products of tile j, opens the other's turn — except consumer 1
  // after its last tile, whose opening nobody would wait for (every bar.sync is matched by
  // exactly one bar.arrive: Tc_i turns each).
  if (cw == 1 && Tc_i > 0) ptx::named_barrier_arrive(kBarTurn + 0, Tile::kConsumerThreads);
  //! [pingpong]

  // One tile: wait for it, S_j = Q K_j^T issued with O += P_{j-1} V_{j-1}, the online softmax of
  // S_j while that P V may still run, then O = alpha O and P_j packed for the next tile. `masked`
  // is std::true_type for the tiles that cross the diagonal or Skv, `first` for tile 0 (no P V
  // yet): compile-time, so the wgmma sequence of a tile has no run-time branch.
  auto tile_step = [&](int j, auto masked, auto first) {
    constexpr bool kMasked = decltype(masked)::value;
    constexpr bool kFirst = decltype(first)::value;
    const int s = j % kStages;
    const int kv0 = j * Bc;  // first key of K_j, V_j

    //! [wait]
    // K_j has landed: the phase of k_full[s] completes when TMA has written all the bytes thread 0
    // announced, and a thread that sees it complete sees those bytes. So has V_{j-1}, whose P V
    // this tile issues.
    wait_parity(&k_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "k_full", s);
    const int sp = (j + kStages - 1) % kStages;  // stage of tile j - 1 (unless kFirst)
    if constexpr (!kFirst)
      wait_parity(&v_full[sp], static_cast<std::uint32_t>((j - 1) / kStages) & 1u, "v_full", sp);
    //! [wait]

    //! [wgmma]
    ptx::named_barrier_sync(kBarTurn + cw, Tile::kConsumerThreads);  // my turn on the tensor cores
    float s_acc[Tile::kSRegs];  // (64, Bc) fp32 S_ij strip: Bc/8 n8 slices x 4
    // wgmma.fence orders registers, not shared memory (ptx.cuh, "wgmma.fence"): S's accumulator
    // registers were last read by ordinary instructions (the previous tile's softmax), and so were
    // O (its rescale) and P (its packing), which P_{j-1} V_{j-1} below reads in the same batch.
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tile::kQK; ++kk)  // S = Q K^T: D/16 x m64n128k16, the first S = 0 + ..
      ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
    ptx::wgmma_commit_group();
    if constexpr (!kFirst) {
      // P and O are loop-carried: ptxas may have moved them between registers since the fence
      // above (it injects a fence of its own if not, C7519). A fence does not wait for S_j.
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Tile::kPV; ++kk) {  // O += P_{j-1} V_{j-1}: Bc/16 x m64n{D}k16
        if constexpr (D == 64) {
          ptx::wgmma_m64n64k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
        } else {
          ptx::wgmma_m64n128k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
        }
      }
      ptx::wgmma_commit_group();
    }
    // Issued: the other consumer may issue its products (not after consumer 1's last tile).
    if (cw == 0 || j + 1 < Tc_i)
      ptx::named_barrier_arrive(kBarTurn + (1 - cw), Tile::kConsumerThreads);
    // S_j is the older group: wait for it, P_{j-1} V_{j-1} may still run (tile 0: S_0 only).
    ptx::wgmma_wait_group<kFirst ? 0 : 1>();
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
    //! [online_softmax]

    // Keeps the softmax above the wait below in the PTX (arithmetic may otherwise move across an
    // asm volatile). Measured in SASS (nvcc 13.0): ptxas still schedules this wait's
    // WARPGROUP.DEPBAR ahead of the MUFU.EX2s, so the overlap of a warpgroup's softmax with its
    // own P V is not realised yet; the ping-pong between the two warpgroups is (see Limits).
    ptx::wgmma_fence_operand(s_acc);
    // P_{j-1} V_{j-1} has landed in O: O is complete, and P's registers and stage j-1 are free.
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o_acc);
    ptx::wgmma_fence_operand(p_frag);
    if constexpr (!kFirst)
      cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten
#pragma unroll
    for (int n = 0; n < kON; ++n) {  // O_i = alpha O_i, in registers; P_ij V_j is added next tile
      o_acc[4 * n + 0] *= alpha[0];
      o_acc[4 * n + 1] *= alpha[0];
      o_acc[4 * n + 2] *= alpha[1];
      o_acc[4 * n + 3] *= alpha[1];
    }

    //! [p_in_registers]
    // The S accumulator's n8 slices 2kk, 2kk+1 hold exactly the register A operand of k16 step
    // kk (per warp, the mma.m16n8k16 A fragment of stage 06c): rounded to the dtype and packed in
    // pairs, no data crosses lanes.
#pragma unroll
    for (int kk = 0; kk < Tile::kPV; ++kk) {
      p_frag[kk][0] = pack2<T>(s_acc[8 * kk + 0], s_acc[8 * kk + 1]);  // row g, keys 2t..
      p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);  // row g + 8
      p_frag[kk][2] = pack2<T>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);  // row g, keys 8+2t..
      p_frag[kk][3] = pack2<T>(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);  // row g + 8
    }
    //! [p_in_registers]
  };

  // Tile 0 first (no P V yet), then the unmasked tiles, then the masked ones.
  if (Tc_i > 0) {
    if (Tc_full > 0) {
      tile_step(0, std::false_type{}, std::true_type{});
    } else {
      tile_step(0, std::true_type{}, std::true_type{});
    }
  }
  for (int j = 1; j < Tc_full; ++j)
    tile_step(j, std::false_type{}, std::false_type{});
  for (int j = max(Tc_full, 1); j < Tc_i; ++j)
    tile_step(j, std::true_type{}, std::false_type{});

  // The last tile's O += P V (outside the ping-pong: nothing left to overlap it with).
  if (Tc_i > 0) {
    const int sp = (Tc_i - 1) % kStages;
    wait_parity(&v_full[sp], static_cast<std::uint32_t>((Tc_i - 1) / kStages) & 1u, "v_full", sp);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tile::kPV; ++kk) {
      if constexpr (D == 64) {
        ptx::wgmma_m64n64k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
      } else {
        ptx::wgmma_m64n128k16_rs<T>(o_acc, p_frag[kk], v_desc(sp, kk), 1);
      }
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o_acc);
    // (No arrive on empty: the producer has issued its last tile and waits for nothing.)
  }

  //! [epilogue]
  // No copy is in flight here: thread 0 issued only tiles < Tc_i (and Q_i only when Tc_i > 0), and
  // every consumer thread waited for each of them. The staging stores below overwrite only this
  // consumer's own rows of the Q region, which its last S wgmma (completed: wait_group<0>) read;
  // the other consumer's rows are disjoint.
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
      lse[static_cast<std::int64_t>(bh) * sh.sq + my_row[h]] =
          l > 0.0f ? kLn2 * fmaf(m_run[h], sh.scale_log2, log2f(l)) : -INFINITY;
    }
  }
  // Stage this consumer's O / l in its own 64 rows of the Q region, swizzled as TMA reads them
  // (its 128-byte swizzle, the layout TMA wrote Q in): a 4-byte store per accumulator pair; for
  // each n8 slice the warp writes 8 rows x 4 lanes at one chunk position -> a column of the
  // swizzle picture, 32 distinct banks.
  // sO: this consumer's (64, D) dtype rows, swizzled column blocks.
  unsigned char* sO =
      reinterpret_cast<unsigned char*>(sQ) + cw * Tile::kConsumerRows * Tile::kSwizzleBytes;
#pragma unroll
  for (int n = 0; n < kON; ++n) {
    const int col = 8 * n + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned char* dst = sO + (col / Tile::kBlockCols) * Tile::kQBlockBytes +
                           swizzled_offset(strip_row[h], col % Tile::kBlockCols);
      *reinterpret_cast<std::uint32_t*>(dst) =
          pack2<T>(o_acc[4 * n + 2 * h] * inv_l[h], o_acc[4 * n + 2 * h + 1] * inv_l[h]);
    }
  }
  // Ordinary stores read next by the copy engine (async proxy): each writer fences, then the
  // warpgroup's barrier tells the issuing thread that all 128 have.
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
  ptx::named_barrier_sync(kBarStore + cw, Tile::kWarpgroupThreads);
  // (64, 64) boxes at (col, row, head); rows >= Sq lie outside the tensor and are not written.
  // A consumer whose 64 rows all lie past Sq stores nothing (no box entirely out of bounds).
  if (tid == 0 && row0 + cw * Tile::kConsumerRows < sh.sq) {
#pragma unroll
    for (int c = 0; c < D / Tile::kBlockCols; ++c) {
      const std::int32_t coords[3] = {c * Tile::kBlockCols, row0 + cw * Tile::kConsumerRows, bh};
      cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, &tm_o,
                                      coords, sO + c * Tile::kQBlockBytes);
    }
    cuda::ptx::cp_async_bulk_commit_group();
    // Shared memory must stay valid until the engine has read it: wait before the block exits.
    cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
  }
  //! [epilogue]
}

}  // namespace

FS_DEFINE_KERNEL_OF(fused_attention_kernel<T, Tile, kCausal>)
FS_EXPORT_KERNELS(TileD64)
FS_EXPORT_KERNELS(TileD128)

}  // namespace flashsteps::hopper
