// stages/08b_persistent/scheduler.cuh — the tile scheduler of the persistent kernel: which work
// item (one query block Q_i of Br rows of one head) a persistent block computes next. Host and
// device code (tests/cpu/test_tile_scheduler.cpp checks the mapping on the CPU); no CUDA call.
//
// The T = B*H*Tr work items are numbered t = 0 .. T-1 in the order the grid takes them (order()
// maps t to (bh, i)); a grid of G persistent blocks walks that list in one of two ways:
//   static   block b takes t = b, b + G, b + 2G, ...           (item_of_slot(b, n, G): its n-th)
//   dynamic  block b takes t = b first, then t = G + fetch_add(counter, 1) while t < T: whichever
//            block is free takes the next item (the counter starts at 0 in every launch)
// Both give every t in [0, T) to exactly one block, for any G >= 1: G > T leaves blocks idle.
#pragma once

#include <cstdint>

#include "flashsteps/mask.hpp"  // FS_HOST_DEVICE

namespace flashsteps::hopper {

/// How the persistent blocks share the work items (the launcher picks one per launch).
enum class Schedule : int {
  kStatic = 0,   // block b: items b, b + G, b + 2G, ...
  kDynamic = 1,  // a global atomic counter hands out the next item to the first free block
};

/// One work item: query block Q_i (rows i*Br .. i*Br + Br-1) of head bh = b*H + h.
struct WorkItem {
  int bh;
  int i;
};

//! [scheduler_traits]
/// The order of the work items, for query blocks of kBr rows, head dim kD and the causal flag.
///   non-causal  every Q_i costs the same Tc key tiles: a head's query blocks stay adjacent (they
///               read the same K, V, which stays in L2), the last one first (08a's launch order).
///   causal      Q_i costs about i+1 key tiles (the diagonal): longest processing time first
///               (LPT, Graham 1969): the heaviest query blocks of every head before the lighter
///               ones, so that the last items to start are short and the blocks finish together.
///               Heads go in sections of at most kSectionBytes of K and V (an L2-sized group): LPT
///               inside a section, sections one after the other, so K, V of the heads in flight
///               stay in L2 (FlashAttention-3's DynamicPersistentTileScheduler,
///               hopper/tile_scheduler.hpp, orders its tiles the same way).
template <int kBr, int kD, bool kCausal>
struct TileSchedulerTraits {
  static constexpr int Br = kBr;
  static constexpr int D = kD;
  static constexpr bool kLpt = kCausal;
  /// K and V of the heads of one LPT section: 32 MiB of H100's 50 MB L2 (FlashAttention-3's
  /// size_l2 in the same file), the rest for Q, O and the previous section's tail. A test build
  /// defines FLASHSTEPS_SCHEDULER_SECTION_BYTES smaller, so that the emulator's small shapes span
  /// several sections (emu.<stage>.sections); the GPU builds never define it.
#ifdef FLASHSTEPS_SCHEDULER_SECTION_BYTES
  static constexpr std::int64_t kSectionBytes = FLASHSTEPS_SCHEDULER_SECTION_BYTES;
#else
  static constexpr std::int64_t kSectionBytes = std::int64_t{32} << 20;
#endif
  static constexpr int kElem = 2;  // fp16, bf16

  static_assert(Br > 0 && D > 0, "a work item is a query block of Br rows and D columns");
  static_assert(kSectionBytes >= std::int64_t{2} * kElem * D * Br,
                "a section holds at least one head's first key tile of K and V");

  /// Heads per LPT section for Skv keys: as many whole heads' K and V as kSectionBytes holds, at
  /// least one.
  FS_HOST_DEVICE static int heads_per_section(int skv, std::int64_t bh_count) {
    const std::int64_t per_head = std::int64_t{2} * kElem * D * skv;
    const std::int64_t n = kSectionBytes / per_head;
    return static_cast<int>(n < 1 ? 1 : (n < bh_count ? n : bh_count));
  }

  /// Work item t of the order, 0 <= t < bh_count * tr.
  FS_HOST_DEVICE static WorkItem order(int t, int tr, std::int64_t bh_count, int skv) {
    if constexpr (!kLpt) {
      return {t / tr, tr - 1 - t % tr};
    } else {
      const int hs = heads_per_section(skv, bh_count);  // heads of a full section
      const int section = t / (hs * tr);
      const int bh0 = section * hs;                                               // its first head
      const int n = static_cast<int>(bh_count - bh0 < hs ? bh_count - bh0 : hs);  // its heads
      const int u = t - bh0 * tr;  // position inside the section: n heads x tr query blocks
      return {bh0 + u % n, tr - 1 - u / n};  // Q_{Tr-1} of its n heads first, then Q_{Tr-2}, ...
    }
  }
};
//! [scheduler_traits]

//! [scheduler_next]
/// The static schedule: the n-th item of persistent block `slot` of a grid of `grid` blocks (an
/// item index t; t >= T means the block has no n-th item).
FS_HOST_DEVICE inline std::int64_t item_of_slot(int slot, int n, int grid) {
  return slot + std::int64_t{n} * grid;
}

/// The item a block takes after item t: static, t + G; dynamic, G + the counter's old value (the
/// first G items went to the blocks' first turn, item b to block b). `fetched` is that value,
/// which only the dynamic schedule uses.
FS_HOST_DEVICE inline std::int64_t next_item(Schedule schedule, std::int64_t t, int grid,
                                             int fetched) {
  return schedule == Schedule::kStatic ? t + grid : std::int64_t{grid} + fetched;
}
//! [scheduler_next]

}  // namespace flashsteps::hopper
