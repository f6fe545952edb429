// =================================================================================================
// Stage 08b — a persistent kernel: one block per SM walks the work items (batch, head, query
// block) that a tile scheduler hands it, and loads the next item's Q, K, V under the last one's
// epilogue.
//
// What changed since stage 08a (its parent): the consumers' tile body (tile_step, with 08a's O
// rescale before P V is issued and its shared-memory anchor before wgmma.wait_group 0), the
// softmax, the descriptors, the ping-pong and the epilogue's staging are 08a's; the kernel's outer
// structure changed:
//  * The grid: G = one block per SM (the launcher; a test may set G), not one per query block.
//    Each role runs a loop over work items k = 0, 1, ...; item k of block b comes from
//    scheduler.cuh: a static order (non-causal: 08a's launch order; causal: longest processing
//    time first, the heaviest query blocks of every head first) walked either statically (b, b+G,
//    ...) or dynamically (a global atomic counter, tile_counter; the launcher picks).
//  * The producer thread fetches the next item and publishes it in items[k % 2] (mbarrier
//    item_full[k % 2]); the consumers read it there.
//  * The ring of K/V stages runs on across items (ring position r0 + j), so the producer loads
//    the next item's first K, V tiles while the consumers finish the last P V and the epilogue;
//    the stage of an item's last tile is released after its last P V, as every other.
//  * Q's region doubles as O's staging buffer (07b): the next item's Q load waits on q_empty, on
//    which each consumer's storing thread arrives once its TMA store has read the staged O
//    (cp.async.bulk.wait_group.read). Q is loaded for every item, even one whose rows see no key.
//
//! [prediction]
// Which metric should move, and by how much (written before any GPU ran this stage or 08a; H100
// SXM, fp16, the bench's shapes: B*S = 16k, H*D = 2048; against 08a on the same run). The model:
// no run has measured 08a, whose step changes the steady-state tile body and not the per-block
// prologue and epilogue (08a's header: 1.00-1.05x over 07d at S = 512), so the fixed cost per
// block is 07d's. The model ledger (book page model_ledger, generated from the committed run by
// bench/model-ledger.py: its table of the fixed cost of a block) reads it from 07d's run (as
// 07_hopper) at D = 128, S = 512, non-causal: 2048 blocks in 15.5 waves of 132; a wave's time
// less a block's 33.5 MFLOP at 07d's own 16k rate is the fixed cost per block, which goes to the
// launch, the barrier init, the first Q, K, V loads with nothing to
// overlap them, the fill and drain of the consumers' pipeline and the epilogue. A persistent
// block hides the loads of item k+1 under item k's end (the K, V ring runs on; Q waits for the
// store's read, so that latency stays exposed) and pays the launch once: 15-40% of that fixed
// cost. If 08a shortens the block's compute (up to 5% at S = 512, 08a's range), the same
// microseconds are a slightly larger share of 08a's block, under a point of speedup: the ranges
// first written against 07d stand. Under a causal mask a block's work is i+1 key tiles; 08a's
// launch order (07d's) leaves the hardware's block scheduler to balance them (a head's last query
// block first), the LPT order with a dynamic counter keeps the last items short. FA3's scheduler
// (DynamicPersistentTileScheduler, hopper/tile_scheduler.hpp in Dao-AILab/flash-attention) takes
// the same shape as ours: LPT order in L2-sized sections of heads, first item blockIdx.x, then
// gridDim.x + atomicAdd.
//  * Speedup over 08a (same run), D = 128: non-causal 1.03-1.12x at S = 512, 1.00-1.06x at 2k,
//    0.98-1.03x at 16k; causal 1.08-1.20x at S = 512, 1.05-1.15x at 2k, 0.98-1.04x at 16k.
//  * D = 64 (half the work per item, the same fixed cost): non-causal 1.05-1.15x at S = 512,
//    causal 1.08-1.22x at S = 512; 0.98-1.04x at 16k either way.
//  * Causal, dynamic against static (FLASHSTEPS_TILE_SCHEDULER): what a CPU simulation of this
//    scheduler's own order gives (bench/schedule-sim.cpp over scheduler.cuh, tested by
//    tests/cpu/test_schedule_sim.cpp; its table and Gantt chart are generated into the chapter).
//    A static walk of the LPT order gives block b item b of every round of G = 132 items; an L2
//    section of h heads puts ~132 / h query-block indices into a round (h = 4 at D = 128, 16k), so
//    block 0's items are the round's heaviest by up to that many key tiles, and every section
//    starts heavy again. Simulated: the dynamic counter ~1.1-1.2x faster at D = 128, S = 2k-16k,
//    ~1.03x at D = 64, within 3% at S = 512 (this line was 1.01-1.06x at 4k-16k before the
//    simulation: hand arithmetic that left out the sections).
//  * Resources: registers as 08a (168 at launch, 24 / 240 after setmaxnreg), 0 spills; shared
//    memory +32 B (three mbarriers, two item slots).
//! [prediction]
//
// Limits: compute capability 9.0 exactly (sm_90a: wgmma, setmaxnreg); D = 64 and 128; fp16 and
// bf16; causal or not; any Sq, Skv >= 1; Q, K, V, O 16-byte aligned (TMA's rules); B*H*Tr < 2^31
// work items (the ring position, a block's key tiles so far, is 64-bit); one block per SM, no
// clusters. The dynamic schedule needs a 4-byte workspace, zeroed in every launch (a
// cudaMemsetAsync before the kernel, in the stream). 08a's anchor holds the softmax between the
// two waits for nvcc 13.0 only, as CTest sass.overlap.08b_persistent reads it. 912 bytes of the
// 227 KiB opt-in remain at D = 128. Not yet, versus FA3: no TMA multicast, K released with V,
// Bc = 128 at D = 128 (FA3: 176), no FP8, Q's load not overlapped with the store's read (FA3 has
// no separate O buffer either, but stages O over V's stages, not Q: its SharedStorage aligns the
// epilogue's smem_o with the mainloop's smem_v, hopper/flash_fwd_kernel_sm90.h). The model behind
// the numbers, and the verdicts: book/chapters/stage_08b_persistent.md.
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
#include "scheduler.cuh"

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

//! [fetch]
// The dynamic schedule's fetch: the counter's old value, +1. Relaxed: only the values must be
// distinct, nothing is published through the counter.
__device__ __forceinline__ int fetch_add_one(int* counter) {
  return atomicAdd(counter, 1);
}
//! [fetch]

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
//   q_full                count 1, one phase per work item k (parity k & 1): Q_i of item k.
//   q_empty               count 2 (thread 0 of each consumer): item k's O staging in the Q region
//                         has been read by its TMA store; Q of item k+1 may be loaded over it.
//   item_full[2]          count 1: the producer has written work item k into items[k % 2].
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
// The ring runs on across work items: j above is the block's ring position, r0 + the item's tile
// (r0: the key tiles of the block's earlier items), so the producer fills stages with the next
// item's K, V while the consumers still finish the last item (its last P V, its epilogue).
//! [ring]

template <class T, class Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads, 1)
    fused_attention_kernel(const __grid_constant__ CUtensorMap tm_q,
                           const __grid_constant__ CUtensorMap tm_k,
                           const __grid_constant__ CUtensorMap tm_v,
                           const __grid_constant__ CUtensorMap tm_o, float* __restrict__ lse,
                           int* __restrict__ tile_counter, Shape sh) {
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
  std::uint64_t* q_empty = bars + 1 + 3 * kStages;
  std::uint64_t* item_full = bars + 2 + 3 * kStages;                  // [Tile::kItemSlots]
  float* anchor = reinterpret_cast<float*>(smem + Tile::kOffAnchor);  // a word per consumer
  int* items = reinterpret_cast<int*>(smem + Tile::kOffItems);        // [Tile::kItemSlots]

  //! [work_items]
  // The work items: T = B*H*Tr query blocks, in the order of scheduler.cuh (static for
  // non-causal, longest processing time first for causal). Persistent block b takes item b
  // first, then the next one by the schedule (tile_counter: the dynamic one).
  using Sched = TileSchedulerTraits<Br, D, kCausal>;
  const std::int64_t n_items = sh.bh * sh.tr;  // T
  const int G = static_cast<int>(gridDim.x);
  // Tiles a work item visits (every warpgroup agrees): 0 .. Tc_i-1, the last Tc_i - Tc_full of
  // them masked (they cross the causal diagonal or Skv). Same bounds as stage 06, for Br = 128.
  auto key_tiles = [&](int row0, int* Tc_full) {
    const int last_row = min(row0 + Br, sh.sq) - 1;
    const int kv_stop = static_cast<int>(causal_kv_end(last_row, sh.sq, sh.skv, kCausal));
    const int kv_full = static_cast<int>(causal_kv_end(row0, sh.sq, sh.skv, kCausal));
    *Tc_full = kv_full / Bc;         // tiles 0 .. Tc_full-1 need no mask
    return (kv_stop + Bc - 1) / Bc;  // Tc_i: 0 when no row of the block sees a key
  };
  //! [work_items]

  //! [barriers_init]
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(q_full, 1);
    cuda::ptx::mbarrier_init(q_empty, Tile::kConsumers);
    for (int k = 0; k < Tile::kItemSlots; ++k)
      cuda::ptx::mbarrier_init(&item_full[k], 1);
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
    if (threadIdx.x == 0) {
      //! [persistent_producer]
      std::int64_t r0 = 0;             // ring position: key tiles of the block's earlier items
      std::int64_t item = blockIdx.x;  // the block's first work item (both schedules)
      for (int k = 0;; ++k) {
        // Work item k for the consumers (T = n_items: none left). Slot k % 2 last held item k-2,
        // which both consumers read before they released item k-1's Q region (the q_empty wait
        // below).
        items[k % Tile::kItemSlots] = static_cast<int>(item < n_items ? item : n_items);
        cuda::ptx::mbarrier_arrive(&item_full[k % Tile::kItemSlots]);
        if (item >= n_items) break;
        const WorkItem w = Sched::order(static_cast<int>(item), sh.tr, sh.bh, sh.skv);
        const int bh = w.bh;        // b*H + h
        const int row0 = w.i * Br;  // first row of Q_i
        int Tc_full;
        const int Tc_i = key_tiles(row0, &Tc_full);
        // The Q region holds item k-1's O staging until both consumers' TMA stores have read it.
        // (Item 0 waits on parity 1 of a fresh barrier: complete, as for empty[s].)
        wait_parity(q_empty, (static_cast<std::uint32_t>(k) & 1u) ^ 1u, "q_empty", 0);
        //! [persistent_producer]
        //! [tma]
        // Q_i: per column block, one (Br = 128 rows, 64 cols) box at (col, row, head). Rows >= Sq
        // of the last query block lie outside the 3-D tensor: zero-filled and counted in the
        // transaction bytes, as for any partly out-of-bounds box. One box of Br rows (not two of
        // 64) because row0 < Sq keeps it partly in bounds: a box entirely outside the tensor is a
        // case the documentation leaves open, and a short byte count would hang the consumers.
        // (Loaded even when no row sees a key, Tc_i = 0: the consumers wait for every item's Q.)
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
          const int s = (r0 + j) % kStages;
          const std::uint32_t n = static_cast<std::uint32_t>((r0 + j) / kStages);
          wait_parity(&empty[s], (n & 1u) ^ 1u, "empty",
                      s);  // both consumers are done with the tile kStages ring positions back
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
        //! [next_item]
        r0 += Tc_i;
        // The next work item. Dynamic: one atomic per item, by the one thread that needs it (the
        // consumers learn it through items[], above); relaxed: only the values must be distinct.
        int fetched = 0;
        if (tile_counter != nullptr) fetched = fetch_add_one(tile_counter);
        item = next_item(tile_counter != nullptr ? Schedule::kDynamic : Schedule::kStatic, item, G,
                         fetched);
        //! [next_item]
      }
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
    //! [persistent_consumer]
    std::int64_t r0 = 0;  // ring position, as the producer's: key tiles of earlier items
    for (int k = 0;; ++k) {
      // Work item k, as the producer published it (T = n_items: no item left).
      wait_parity(&item_full[k % Tile::kItemSlots],
                  static_cast<std::uint32_t>(k / Tile::kItemSlots) & 1u, "item_full",
                  k % Tile::kItemSlots);
      const int item = items[k % Tile::kItemSlots];
      if (item >= n_items) break;
      const WorkItem w = Sched::order(item, sh.tr, sh.bh, sh.skv);
      const int bh = w.bh;        // b*H + h
      const int row0 = w.i * Br;  // first row of Q_i
      int Tc_full;
      const int Tc_i = key_tiles(row0, &Tc_full);
      //! [persistent_consumer]
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
      // j + 1's issue, or the last P V after the loop), so that nothing after the softmax touches
      // O.
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

      wait_parity(q_full, static_cast<std::uint32_t>(k) & 1u, "q_full", 0);
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
        const int s = (r0 + j) % kStages;
        const int kv0 = j * Bc;  // first key of K_j
        wait_parity(&k_full[s], static_cast<std::uint32_t>((r0 + j) / kStages) & 1u, "k_full", s);
        const int sp = (r0 + j + kStages - 1) % kStages;  // stage of tile j - 1 (unless kFirst)
        if constexpr (!kFirst)
          wait_parity(&v_full[sp], static_cast<std::uint32_t>((r0 + j - 1) / kStages) & 1u,
                      "v_full", sp);

        //! [wgmma]
        ptx::named_barrier_sync(kBarTurn + cw,
                                Tile::kConsumerThreads);  // my turn on the tensor cores
        float s_acc[Tile::kSRegs];  // (64, Bc) fp32 S_ij strip: Bc/8 n8 slices x 4
        // A register fence, not a memory one (ptx.cuh, "wgmma.fence"): it orders the ordinary
        // accesses since the last wgmma to S's accumulator registers (the previous softmax), to O
        // (its rescale) and to P (its packing) before the wgmmas below that use them: S's, and, in
        // the same batch, P_{j-1} V_{j-1}'s.
        ptx::wgmma_fence();
        // S = Q K^T: D/16 x m64n128k16, first one S = 0 + ..
#pragma unroll
        for (int kk = 0; kk < Tile::kQK; ++kk)
          ptx::wgmma_m64n128k16_ss<T>(s_acc, q_desc(kk), k_desc(s, kk), kk > 0 ? 1 : 0);
        ptx::wgmma_commit_group();
        if constexpr (!kFirst) {
          rescale_o();  // O = alpha_{j-1} O: the previous tile's factor, before P_{j-1} V_{j-1}
                        // adds
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

        // Keeps the softmax above the wait below in the PTX (arithmetic may otherwise move across
        // an asm volatile). That alone does not hold in SASS: wgmma.wait_group has no operand, and
        // ptxas 13.0 schedules its WARPGROUP.DEPBAR right after the wait for S_j, ahead of every
        // MUFU.EX2 (stage 07d). What ptxas does keep in order is a shared-memory store and a later
        // WARPGROUP.DEPBAR; the anchor is such a store, of a value that needs every exponential of
        // the tile (l sums them all), so the softmax must finish before it and the wait comes
        // after.
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
        const int sp = (r0 + Tc_i - 1) % kStages;
        wait_parity(&v_full[sp], static_cast<std::uint32_t>((r0 + Tc_i - 1) / kStages) & 1u,
                    "v_full", sp);
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
        // The ring runs on into the next item: its last stage is released as every other.
        cuda::ptx::mbarrier_arrive(&empty[sp]);  // K_{Tc_i-1}, V_{Tc_i-1} may be overwritten
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
        // Shared memory must stay valid until the engine has read it: wait before the Q region is
        // released to the next item (q_empty, below).
        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
      }
      //! [epilogue]
      //! [release_q]
      // Item k's O has left the Q region (this consumer's TMA store has read it; the other 127
      // threads staged their part before the store barrier): item k+1's Q may be loaded there.
      if (tid == 0) cuda::ptx::mbarrier_arrive(q_empty);
      //! [release_q]
      r0 += Tc_i;
    }
  }
}

}  // namespace

FS_DEFINE_KERNEL_OF(fused_attention_kernel<T, Tile, kCausal>)
FS_EXPORT_KERNELS(TileD64)
FS_EXPORT_KERNELS(TileD128)

}  // namespace flashsteps::hopper
