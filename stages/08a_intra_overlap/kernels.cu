// =================================================================================================
// Stage 08a — the overlap, kept: 07d's kernel, with the softmax of S_j between the wait for S_j and
// the wait for P_{j-1} V_{j-1} in the compiled code, not only in the source.
//
// What changed since stage 07d (its parent): the producer, the ring, the ping-pong, the softmax's
// math and the epilogue are 07d's. 07d issues S_j and P_{j-1} V_{j-1} together and writes the
// softmax between wgmma.wait_group 1 and 0, but ptxas 13.0 schedules the second wait
// (WARPGROUP.DEPBAR.LE gsb0, 0x0) right after the first, ahead of every MUFU.EX2: a consumer
// waits for both of its products before its softmax. Two changes bring FlashAttention-3's order:
//  * O = alpha_{j-1} O runs before P_{j-1} V_{j-1} is issued (FA3's "rescale before the GEMM"),
//    so nothing after the softmax reads or writes O; alpha is carried one tile; the last P V,
//    after the loop, takes the last alpha the same way.
//  * An anchor: each consumer thread stores l_0 + l_1 (its rows' running sums, which need every
//    exponential of the tile) to its own word of shared memory before wait_group 0. ptxas keeps a
//    shared-memory store above a later WARPGROUP.DEPBAR; the store keeps the softmax above itself.
//    Never read; 1 KiB of shared memory, one STS per thread and tile.
// CTest sass.overlap.08a_intra_overlap reads this stage's sm_90a SASS and fails unless every
// steady-state tile body has all its MUFU.EX2 between the two waits; sass.overlap.07d_overlap
// shows 07d failing the same check.
//
//! [prediction]
// Which metric should move, and by how much (written before any GPU ran this stage; H100 SXM,
// fp16, non-causal; against stage 07d on the same run):
//  * The model (per consumer warpgroup and tile of Bc = 128 keys, 64 rows; written out once in
//    the model ledger, book page model_ledger, which bench/model-ledger.py generates from the SASS
//    and the committed run): the two products take 64 x 128 x 2D MACs, at ~2,048 MAC per clock
//    per SM: G = 1,024 clocks at D = 128, 512 at D = 64, S and P V half each. The softmax's 66
//    MUFU.EX2 per thread (16 lanes per clock per SM, 4 per SM sub-partition) take >= 528 clocks
//    per warp; this header first added ~170 for the FFMA / FMNMX / FADD / F2FP around them, ~700
//    in all. Without the overlap (07d) a consumer's turn is S + P V + softmax, a round
//    max(2G, G + T_s); with it, S + softmax, max(2G, G/2 + T_s). With T_s ~ 700: 1,024 + 700 <
//    2,048 at D = 128 (already hidden), 512 + 700 = 1,212 > 1,024 at D = 64 (the tensor cores idle
//    ~15%), 256 + 700 < 1,024 with the overlap: 1.18x at D = 64, nothing at D = 128. The ledger
//    has two ends for T_s instead: T_issue, counted from the tile body's SASS (the rest issues
//    beside the MUFU's work, so T_issue is the larger, not the sum: less than 700, and a smaller
//    gain at D = 64), and T_eff, the softmax time 07d's measured rates need, longer than G at both
//    head dims (latency-bound: one warp per sub-partition, dependent steps), where the overlap
//    gains at D = 128 too. Its steps table gives the gain at both ends; the ranges below were
//    written before it, from T_s ~ 700, and stand as the prediction.
//  * D = 64, S >= 2k: 1.05-1.20x faster than 07d (from T_s ~ 700: 1,212 / 1,024 = 1.18).
//  * D = 128, S >= 2k: 1.00-1.10x. From T_s ~ 700 nothing is left to win; at T_eff the ledger
//    gives more; FlashAttention-3's ablation measures 582 -> 661 TFLOP/s (+13.6%) for its
//    intra-warpgroup pipelining at D = 128, non-causal ([FA3], Section 4.2, Table 2).
//  * Causal, S >= 2k: the same ranges (the loop is the same; masked tiles are few).
//  * Short S (512): 1.00-1.05x at both head dims: a block visits 4 tiles, the fixed per-block
//    prologue and epilogue dominate (07d's profile) and this step does not touch them.
//  * Tensor pipe active (the HMMA pipe metric, which counts wgmma; profile at D = 64, S = 2k):
//    up 5-15 points from 07d's.
//  * Resources: 0 spills; ptxas's register count at launch stays at the 168 cap; shared memory
//    +1 KiB (149,608 B at D = 64, 231,504 B at D = 128).
//! [prediction]
//
// Limits: 07d's (compute capability 9.0 exactly; D = 64 and 128; fp16 and bf16; causal or not; any
// Sq, Skv >= 1; 16-byte aligned tensors; one block per SM, no clusters; no persistent grid, no
// TMA multicast, K released with V, Bc = 128, forward causal order). The anchor holds the order
// for nvcc 13.0 only, as the test reads it: another ptxas may schedule differently, and the test
// is what says so. 944 bytes of the 227 KiB opt-in remain at D = 128.
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

// The named barriers (bar.sync / bar.arrive ids; 0 is __syncthreads()'s), one meaning per id.
// Each kind comes in a pair, one per consumer warpgroup c = 0, 1, and consumer c's barrier is
// its pair's first id + c: kBarTurn + cw, kBarStore + cw.
enum NamedBarrier : int {
  kBarTurn = 1,            // consumer 0's turn to issue its wgmmas (256 threads: both consumers)
  kBarTurnConsumer1 = 2,   // consumer 1's turn to issue its wgmmas (256 threads: both consumers)
  kBarStore = 3,           // consumer 0's staged O is complete (128 threads: its warpgroup)
  kBarStoreConsumer1 = 4,  // consumer 1's staged O is complete (128 threads: its warpgroup)
};
static_assert(kBarTurnConsumer1 == kBarTurn + 1 && kBarStoreConsumer1 == kBarStore + 1,
              "consumer c's barrier of a pair is the pair's first id + c");
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
// TMA's CU_TENSOR_MAP_SWIZZLE_128B and the wgmma descriptors' swizzle mode 1 agree on one layout
// (stage 06's XOR swizzle, now done by the hardware on both sides): a (rows, 64) column block is
// stored as 128-byte rows, and inside each 1024-byte atom of 8 rows the 16-byte chunk c of row r
// sits at chunk position c ^ (r % 8):
//
//      chunk position:   0    1    2    3    4    5    6    7        byte offset of element
//      row 0             c0   c1   c2   c3   c4   c5   c6   c7       (r, col) of a column block:
//      row 1             c1   c0   c3   c2   c5   c4   c7   c6       r * 128
//      ...                                                           + ((col / 8) ^ (r % 8)) * 16
//      row 7             c7   c6   c5   c4   c3   c2   c1   c0       + (col % 8) * 2
//
// D = 128 is two column blocks, (rows, 0..63) and (rows, 64..127), one after the other.
// Only the epilogue computes this by hand (its O staging stores); everything else is TMA / wgmma.
__device__ __forceinline__ std::uint32_t swizzled_offset(int r, int col) {
  return static_cast<std::uint32_t>(r * 128 + (((col / 8) ^ (r % 8)) * 16) + (col % 8) * 2);
}
//! [swizzle]

//! [ring]
// The ring (kStages stages; tile j in stage j % kStages) and its mbarriers:
//   k_full[s], v_full[s]  count 1: the producer's arrive.expect_tx(bytes of K_j / V_j); the phase
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
//   consumer:  wait k_full[s] n&1 -> S_j = Q K_j^T ... wait v_full[s] n&1 -> O += P_j V_j ...
//              wgmma.wait_group -> arrive empty[s]
//! [ring]

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads, 1)
    fused_attention_kernel(const __grid_constant__ CUtensorMap tm_q,
                           const __grid_constant__ CUtensorMap tm_k,
                           const __grid_constant__ CUtensorMap tm_v,
                           const __grid_constant__ CUtensorMap tm_o, float* __restrict__ lse,
                           Shape sh) {
  constexpr int D = Tile::D, Br = Tile::Br, Bc = Tile::Bc, kStages = Tile::Stages;
  constexpr int kColBlocks = Tile::kColBlocks, kBlockCols = Tile::kBlockCols;
  constexpr int kRows = Tile::kConsumerRows;  // 64 query rows per consumer warpgroup

  FS_DYNAMIC_SHARED(unsigned char, smem_raw);
  // Round the base up to 1024 bytes: swizzle atoms, TMA's 128B-swizzled boxes and the wgmma
  // descriptors (base offset 0) all assume it. kSmemBytes includes the slack.
  unsigned char* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  unsigned char* sQ = smem + Tile::kOffQ;  // (Br, D) dtype: kColBlocks x (Br, 64), swizzled
  // Stage s: K_j (Bc, D) and V_j (Bc, D), each kColBlocks x (Bc, 64), swizzled.
  auto stage_k = [&](int s) { return smem + Tile::kOffK + s * Tile::kKVBytes; };
  auto stage_v = [&](int s) { return smem + Tile::kOffV + s * Tile::kKVBytes; };
  auto* bars = reinterpret_cast<std::uint64_t*>(smem + Tile::kOffBar);
  std::uint64_t* q_full = bars;
  std::uint64_t* k_full = bars + 1;
  std::uint64_t* v_full = bars + 1 + kStages;
  std::uint64_t* empty = bars + 1 + 2 * kStages;
  float* anchor = reinterpret_cast<float*>(smem + Tile::kOffAnchor);  // a word per consumer

  // One block per (head, query block), the query blocks of a head adjacent in launch order (they
  // share K, V through L2); inside a head the last query block first (the longest under a causal
  // mask), as in stage 06.
  const int i = sh.tr - 1 - static_cast<int>(blockIdx.x % static_cast<unsigned>(sh.tr));
  const int bh = static_cast<int>(blockIdx.x / static_cast<unsigned>(sh.tr));  // b*H + h
  const int row0 = i * Br;                                                     // first row of Q_i

  // Tiles the block visits (every warpgroup agrees): 0 .. Tc_i-1, the last Tc_i - Tc_full of them
  // masked (they cross the causal diagonal or Skv). Same bounds as stage 06, for Br = 128.
  const int last_row = min(row0 + Br, sh.sq) - 1;
  const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, sh.skv, kCausal));
  const int Tc_i = (kv_stop + Bc - 1) / Bc;  // 0 when no row of the block sees a key
  const int kv_full = static_cast<int>(causal_kv_end(row0, sh.sq, sh.skv, kCausal));
  const int Tc_full = kv_full / Bc;  // tiles 0 .. Tc_full-1 need no mask

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

  //! [setmaxnreg]
  // The warpgroup index, broadcast from lane 0: the same value, but one the compiler can prove is
  // warp-uniform. ptxas serializes wgmma that sit under a branch it considers divergent (C7520),
  // and a value computed from threadIdx.x is divergent to it.
  const int warpgroup =
      __shfl_sync(kFullMask, static_cast<int>(threadIdx.x) / Tile::kWarpgroupThreads, 0);
  if (warpgroup == 0) {
    // The producer warpgroup: 4 warps, of which one thread works. Its registers go back to the
    // block's pool (all 4 warps must execute setmaxnreg); each consumer warpgroup takes its share
    // with setmaxnreg_inc<kConsumerRegs> first thing in the else branch below. Budgets: 168 at
    // entry (the __launch_bounds__(384, 1) cap) -> 128 x 24 + 256 x 240 = 64,512 of the
    // SM's 65,536. One if/else on the warpgroup, so ptxas allocates each branch to its limit.
    ptx::setmaxnreg_dec<Tile::kProducerRegs>();
    //! [setmaxnreg]
    //! [producer]
    if (threadIdx.x == 0 && Tc_i > 0) {
      //! [tma]
      // Q_i: per column block, one (Br = 128 rows, 64 cols) box at (col, row, head). Rows >= Sq of
      // the last query block lie outside the 3-D tensor: zero-filled and counted in the
      // transaction bytes, as for any partly out-of-bounds box. One box of Br rows (not two of 64)
      // because row0 < Sq keeps it partly in bounds: a box entirely outside the tensor is a case
      // the documentation leaves open, and a short byte count would hang the consumers.
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, q_full,
                                           static_cast<std::uint32_t>(Tile::kQBytes));
#pragma unroll
      for (int c = 0; c < kColBlocks; ++c) {
        const std::int32_t coords[3] = {c * kBlockCols, row0, bh};
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                        sQ + c * Tile::kQBlockBytes, &tm_q, coords, q_full);
      }
      for (int j = 0; j < Tc_i; ++j) {
        const int s = j % kStages;
        const std::uint32_t n = static_cast<std::uint32_t>(j / kStages);
        wait_parity(&empty[s], (n & 1u) ^ 1u, "empty",
                    s);  // both consumers are done with tile j - kStages
        // K_j then V_j: (Bc, 64) boxes at (col, key row, head); keys >= Skv are zero-filled.
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, &k_full[s],
                                             static_cast<std::uint32_t>(Tile::kKVBytes));
#pragma unroll
        for (int c = 0; c < kColBlocks; ++c) {
          const std::int32_t coords[3] = {c * kBlockCols, j * Bc, bh};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          stage_k(s) + c * Tile::kKVBlockBytes, &tm_k, coords,
                                          &k_full[s]);
        }
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, &v_full[s],
                                             static_cast<std::uint32_t>(Tile::kKVBytes));
#pragma unroll
        for (int c = 0; c < kColBlocks; ++c) {
          const std::int32_t coords[3] = {c * kBlockCols, j * Bc, bh};
          cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                          stage_v(s) + c * Tile::kKVBlockBytes, &tm_v, coords,
                                          &v_full[s]);
        }
      }
      //! [tma]
    }
    // Nothing to wait for: every copy issued here is consumed (waited on) by the consumers before
    // they finish, so none outlives the block.
    //! [producer]
  } else {
    //! [consumer]
    ptx::setmaxnreg_inc<Tile::kConsumerRegs>();
    const int cw = warpgroup - 1;  // consumer 0 or 1: Q_i rows 64 cw .. 64 cw + 63
    const int tid = static_cast<int>(threadIdx.x) % Tile::kWarpgroupThreads;
    const int warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // groupID, threadID_in_group (ptx.cuh's layouts)
    // This thread's two rows of Q_i (h = 0: strip row 16 warp + g, h = 1: + 8); rows >= Sq (the
    // ragged last block) are computed on zero-filled Q and never stored.
    const int strip_row[2] = {16 * warp + g, 16 * warp + g + 8};  // in the consumer's 64 rows
    const int my_row[2] = {row0 + cw * kRows + strip_row[0], row0 + cw * kRows + strip_row[1]};
    const int kv_end[2] = {static_cast<int>(causal_kv_end(my_row[0], sh.sq, sh.skv, kCausal)),
                           static_cast<int>(causal_kv_end(my_row[1], sh.sq, sh.skv, kCausal))};

    //! [descriptors]
    // wgmma matrix descriptors (ptx.cuh, wgmma_desc_sw128). All three operands are 128B-swizzled
    // column blocks of 64 columns; a 16-wide k step is 32 bytes along a row (K-major Q, K) or 16
    // rows = 2,048 bytes down the block (MN-major V).
    //   A = Q (64, D), K-major: this consumer's 64 rows of column block c, + 32 B per k16 step.
    //   B = K_j (Bc, D) read as K^T: "N x K, K-major" — no transpose: column block c, + 32 B.
    //   B = V_j (Bc, D) = (k, n) with n contiguous: MN-major (imm-tnsp-b = 1); k16 step kk starts
    //       at row 16 kk; the next 64 columns of n (D = 128) are the next column block: LBO.
    const std::uint32_t q_base =
        ptx::smem_addr(sQ) + static_cast<std::uint32_t>(cw * kRows * Tile::kSwizzleBytes);
    auto q_desc = [&](int kk) {  // k16 step kk of D: column block kk / 4, +32 B per step in it
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

    // Per thread, in the wgmma accumulator layout (ptx.cuh): element 4n + e of an accumulator is
    // row strip_row[e / 2], column 8n + 2t + (e % 2).
    float o_acc[Tile::kORegs];  // (64, D) fp32 O_i strip: D/8 n8 slices x 4
#pragma unroll
    for (int e = 0; e < Tile::kORegs; ++e)
      o_acc[e] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY};  // running max of this thread's 2 rows
    float l_run[2] = {0.0f, 0.0f};  // this lane's share of the running sums (quad-reduced later)
    std::uint32_t p_frag[Tile::kPV][4];  // (64, Bc) dtype P strip: Bc/16 register A operands
    // O_i and l of row h are rescaled by alpha[h] = exp2(tau2 (m_old - m_new)). The softmax of
    // tile j computes it; O takes it one tile later, just before P_j V_j is added to it (tile
    // j + 1's issue, or the last P V after the loop), so that nothing after the softmax touches O.
    float alpha[2] = {0.0f, 0.0f};
    //! [rescale]
    auto rescale_o = [&] {  // O_i = alpha O_i (no wgmma writes O now: its last P V has landed)
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o_acc[4 * n + 0] *= alpha[0];
        o_acc[4 * n + 1] *= alpha[0];
        o_acc[4 * n + 2] *= alpha[1];
        o_acc[4 * n + 3] *= alpha[1];
      }
    };
    //! [rescale]

    if (Tc_i > 0) wait_parity(q_full, 0, "q_full", 0);
    //! [pingpong]
    // Consumer 0 goes first: consumer 1 opens consumer 0's turn barrier once. Afterwards each
    // consumer, after issuing its products of tile j, opens the other's turn — except consumer 1
    // after its last tile, whose opening nobody would wait for (every bar.sync is matched by
    // exactly one bar.arrive: Tc_i turns each).
    if (cw == 1 && Tc_i > 0) ptx::named_barrier_arrive(kBarTurn + 0, Tile::kConsumerThreads);
    //! [pingpong]

    // One tile j: S_j = Q K_j^T and O += P_{j-1} V_{j-1} issued together, then the softmax of S_j
    // while the P V product may still run. `masked` is std::true_type for the diagonal / ragged
    // tiles, `first` for tile 0 (no P V yet): both compile-time, so the wgmma sequence of a tile
    // has no run-time branch for ptxas to track groups across.
    auto tile_step = [&](int j, auto masked, auto first) {
      constexpr bool kMasked = decltype(masked)::value;
      constexpr bool kFirst = decltype(first)::value;
      const int s = j % kStages;
      const int kv0 = j * Bc;  // first key of K_j
      wait_parity(&k_full[s], static_cast<std::uint32_t>(j / kStages) & 1u, "k_full", s);
      const int sp = (j + kStages - 1) % kStages;  // stage of tile j - 1 (unless kFirst)
      if constexpr (!kFirst)
        wait_parity(&v_full[sp], static_cast<std::uint32_t>((j - 1) / kStages) & 1u, "v_full", sp);

      //! [wgmma]
      ptx::named_barrier_sync(kBarTurn + cw,
                              Tile::kConsumerThreads);  // my turn on the tensor cores
      float s_acc[Tile::kSRegs];  // (64, Bc) fp32 S_ij strip: Bc/8 n8 slices x 4
      // A register fence, not a memory one (ptx.cuh, "wgmma.fence"): it orders the ordinary
      // accesses since the last wgmma to S's accumulator registers (the previous softmax), to O
      // (its rescale) and to P (its packing) before the wgmmas below that use them: S's, and, in
      // the same batch, P_{j-1} V_{j-1}'s.
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Tile::kQK; ++kk)  // S = Q K^T: D/16 x m64n128k16, first one S = 0 + ..
        ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
      ptx::wgmma_commit_group();
      if constexpr (!kFirst) {
        rescale_o();  // O = alpha_{j-1} O: the previous tile's factor, before P_{j-1} V_{j-1} adds
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
        for (int n = 0; n < Bc / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (kv0 + 8 * n + 2 * t + (e % 2) >= kv_end[e / 2]) s_acc[4 * n + e] = -INFINITY;
      }

      //! [online_softmax]
      // Stage 06's softmax on a 64-row strip: a row lives in the 4 lanes of a quad (2 shuffles).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = m_run[h];
#pragma unroll
        for (int n = 0; n < Bc / 8; ++n)
          mx = fmaxf(mx, fmaxf(s_acc[4 * n + 2 * h], s_acc[4 * n + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
        // -inf guard: a row with no visible key yet keeps mx = -inf; subtracting 0 instead keeps
        // NaN out (alpha and every p are exp2(-inf) = 0).
        const float m_scaled = (mx == -INFINITY ? 0.0f : mx) * sh.scale_log2;
        alpha[h] = ptx::ex2_approx_ftz(m_run[h] * sh.scale_log2 - m_scaled);
        m_run[h] = mx;
        float row_sum = 0.0f;
#pragma unroll
        for (int n = 0; n < Bc / 8; ++n) {
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
      // asm volatile). That alone does not hold in SASS: wgmma.wait_group has no operand, and
      // ptxas 13.0 schedules its WARPGROUP.DEPBAR right after the wait for S_j, ahead of every
      // MUFU.EX2 (stage 07d). What ptxas does keep in order is a shared-memory store and a later
      // WARPGROUP.DEPBAR; the anchor is such a store, of a value that needs every exponential of
      // the tile (l sums them all), so the softmax must finish before it and the wait comes after.
      ptx::wgmma_fence_operand(s_acc);
      //! [anchor]
      anchor[cw * Tile::kWarpgroupThreads + tid] = l_run[0] + l_run[1];  // never read
      //! [anchor]
      // P_{j-1} V_{j-1} has landed in O; its operands (p_frag, stage j-1) are free again.
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o_acc);
      ptx::wgmma_fence_operand(p_frag);
      if constexpr (!kFirst) {
        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{j-1}, V_{j-1} may be overwritten
      }
      //! [p_in_registers]
      // The S accumulator's n8 slices 2kk, 2kk+1 hold exactly the register A operand of k16 step
      // kk (the mma.m16n8k16 A fragment per warp, ptx.cuh): rounded to the dtype and packed in
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
      rescale_o();
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
    //! [consumer]

    //! [epilogue]
    float inv_l[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = l_run[h];
      l += __shfl_xor_sync(kFullMask, l, 1);  // the quad's shares of the row's l
      l += __shfl_xor_sync(kFullMask, l, 2);
      // O = O_i / l; LSE = ln(2) (tau2 m + log2 l). A row that saw no key has l = 0: O = 0,
      // LSE = -inf (never 0/0).
      inv_l[h] = l > 0.0f ? 1.0f / l : 0.0f;
      if (t == 0 && my_row[h] < sh.sq) {
        lse[static_cast<std::int64_t>(bh) * sh.sq + my_row[h]] =
            l > 0.0f ? kLn2 * fmaf(m_run[h], sh.scale_log2, log2f(l)) : -INFINITY;
      }
    }
    // Stage O / l in this consumer's own 64 rows of the Q region (dead: its last S wgmma has
    // completed; the other consumer's rows are disjoint), in the TMA layout: 128B-swizzled
    // column blocks. Per n8 slice the warp writes 8 rows x 4 lanes at one logical chunk -> 8
    // distinct chunk positions (a column of the swizzle picture): conflict-free 4-byte stores.
    unsigned char* sO = sQ + cw * kRows * Tile::kSwizzleBytes;  // (64, D) dtype, swizzled blocks
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int col = 8 * n + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned char* dst = sO + (col / kBlockCols) * Tile::kQBlockBytes +
                             swizzled_offset(strip_row[h], col % kBlockCols);
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
    if (tid == 0 && row0 + cw * kRows < sh.sq) {
#pragma unroll
      for (int c = 0; c < kColBlocks; ++c) {
        const std::int32_t coords[3] = {c * kBlockCols, row0 + cw * kRows, bh};
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, &tm_o,
                                        coords, sO + c * Tile::kQBlockBytes);
      }
      cuda::ptx::cp_async_bulk_commit_group();
      // Shared memory must stay valid until the engine has read it: wait before the block exits.
      cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
    }
    //! [epilogue]
  }
}

}  // namespace

FS_DEFINE_KERNEL_OF(fused_attention_kernel<T, Tile, kCausal>)
FS_EXPORT_KERNELS(TileD64)
FS_EXPORT_KERNELS(TileD128)

}  // namespace flashsteps::hopper
