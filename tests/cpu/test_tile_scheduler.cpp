// The persistent stages' tile scheduler (scheduler.cuh) on the CPU, compiled once for every stage
// folder that holds a copy of it (tests/CMakeLists.txt, flashsteps_stage_file_test: the build
// passes the copy as FLASHSTEPS_STAGE_FILE): over a sweep of work-item counts T, grids G (one
// block, fewer blocks than items, as many, more) and shapes, every work item goes to exactly one
// persistent block under the static and the dynamic schedule, and the order maps the items one
// to one onto the (head, query block) pairs, the causal one heaviest first in each section of
// heads. (That these counts catch a schedule that drops or repeats an item is shown by stage
// 08b's planted faults, emu.fault.08b_*; the kernels across several sections by
// emu.<stage>.sections.)
#include "flashsteps_catch.hpp"

#include <cstdint>
#include <random>
#include <vector>

#ifndef FLASHSTEPS_STAGE_FILE
#error "FLASHSTEPS_STAGE_FILE names the stage's scheduler.cuh (tests/CMakeLists.txt)"
#endif
#include FLASHSTEPS_STAGE_FILE

using namespace flashsteps::hopper;

namespace {

constexpr int kBr = 128;

/// How many times each item t < T is taken when `slot_items(b)` lists block b's items.
template <class SlotItems>
std::vector<int> visits(std::int64_t T, int G, SlotItems slot_items) {
  std::vector<int> count(static_cast<std::size_t>(T), 0);
  for (int b = 0; b < G; ++b)
    for (std::int64_t t : slot_items(b)) {
      REQUIRE(t >= 0);
      REQUIRE(t < T);
      ++count[static_cast<std::size_t>(t)];
    }
  return count;
}

/// The static schedule's items of block `slot`, walked as the kernel's producer thread walks them:
/// item `slot` first, then next_item() while below T; the n-th of them is item_of_slot(slot, n, G).
std::vector<std::int64_t> static_items(int slot, int G, std::int64_t T) {
  std::vector<std::int64_t> out;
  for (std::int64_t t = slot; t < T; t = next_item(Schedule::kStatic, t, G, 0)) {
    REQUIRE(t == item_of_slot(slot, static_cast<int>(out.size()), G));
    out.push_back(t);
    REQUIRE(static_cast<std::int64_t>(out.size()) <= T);  // a walk that stands still ends here
  }
  return out;
}

/// The dynamic schedule with the blocks finishing in a random order: each block takes item b
/// first, then next_item() with the counter's old value, as the kernel's producer thread does.
std::vector<std::vector<std::int64_t>> dynamic_items(int G, std::int64_t T, unsigned seed) {
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(G));
  std::vector<std::int64_t> current(static_cast<std::size_t>(G));
  std::vector<int> active;
  for (int b = 0; b < G; ++b) {
    current[static_cast<std::size_t>(b)] = b;
    if (b < T) active.push_back(b);
  }
  int counter = 0;
  std::mt19937 rng(seed);
  while (!active.empty()) {
    const std::size_t k = std::uniform_int_distribution<std::size_t>(0, active.size() - 1)(rng);
    const int b = active[k];
    out[static_cast<std::size_t>(b)].push_back(current[static_cast<std::size_t>(b)]);
    const std::int64_t next =
        next_item(Schedule::kDynamic, current[static_cast<std::size_t>(b)], G, counter++);
    if (next >= T) {
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      current[static_cast<std::size_t>(b)] = next;
    }
  }
  return out;
}

/// Grids for T items: one block, a few, fewer than T, T, more than T, an H100's 132.
std::vector<int> grids(std::int64_t T) {
  std::vector<int> g = {1, 2, 3, 7, 8, 132, static_cast<int>(T) + 1, 2 * static_cast<int>(T) + 5};
  if (T > 1) g.push_back(static_cast<int>(T) - 1);
  g.push_back(static_cast<int>(T));
  return g;
}

/// Each (bh, i) pair of bh_count heads and tr query blocks is hit exactly once by order(t).
template <class Traits>
void check_order_is_a_bijection(std::int64_t bh_count, int tr, int skv) {
  std::vector<int> hit(static_cast<std::size_t>(bh_count * tr), 0);
  for (int t = 0; t < bh_count * tr; ++t) {
    const WorkItem w = Traits::order(t, tr, bh_count, skv);
    REQUIRE(w.bh >= 0);
    REQUIRE(w.bh < bh_count);
    REQUIRE(w.i >= 0);
    REQUIRE(w.i < tr);
    ++hit[static_cast<std::size_t>(w.bh * tr + w.i)];
  }
  for (int h : hit)
    REQUIRE(h == 1);
}

}  // namespace

TEST_CASE("tile scheduler: every item goes to exactly one block, static and dynamic", "[sched]") {
  for (std::int64_t T : {1, 2, 3, 5, 12, 18, 31, 64, 131, 132, 133, 263, 1000, 2048}) {
    for (int G : grids(T)) {
      const auto st = visits(T, G, [&](int b) { return static_items(b, G, T); });
      for (int c : st)
        REQUIRE(c == 1);
      for (unsigned seed : {1u, 2u, 3u}) {
        const auto per_block = dynamic_items(G, T, seed);
        const auto dy = visits(T, G, [&](int b) { return per_block[static_cast<std::size_t>(b)]; });
        for (int c : dy)
          REQUIRE(c == 1);
      }
    }
  }
}

TEST_CASE("tile scheduler: a block with no first item takes none, one block takes all", "[sched]") {
  // More slots than items: blocks b >= T have no item, under either schedule.
  CHECK(static_items(5, 8, 5).empty());
  CHECK(dynamic_items(8, 5, 1)[7].empty());
  // One block walks every item in order.
  CHECK(static_items(0, 1, 4) == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(dynamic_items(1, 4, 1)[0] == std::vector<std::int64_t>{0, 1, 2, 3});
  // Static, G = 3, T = 7: block 1 takes 1, 4.
  CHECK(static_items(1, 3, 7) == std::vector<std::int64_t>{1, 4});
}

TEST_CASE("tile scheduler: the orders are one to one onto (head, query block)", "[sched]") {
  for (std::int64_t bh : {1, 2, 3, 16, 33, 130})
    for (int tr : {1, 2, 3, 4, 17, 128})
      for (int skv : {1, 200, 4096, 65536, 1 << 20}) {
        check_order_is_a_bijection<TileSchedulerTraits<kBr, 64, false>>(bh, tr, skv);
        check_order_is_a_bijection<TileSchedulerTraits<kBr, 64, true>>(bh, tr, skv);
        check_order_is_a_bijection<TileSchedulerTraits<kBr, 128, true>>(bh, tr, skv);
      }
}

TEST_CASE("tile scheduler: worked examples of the two orders", "[sched]") {
  using NonCausal = TileSchedulerTraits<kBr, 128, false>;
  using Causal = TileSchedulerTraits<kBr, 128, true>;
  // Non-causal: 07c's launch order, a head's query blocks adjacent, the last one first.
  const WorkItem nc[] = {{0, 2}, {0, 1}, {0, 0}, {1, 2}, {1, 1}, {1, 0}};
  // Causal, 2 heads of 512 keys (256 KiB of K and V each: one section of both): Q_2 of both
  // heads, then Q_1, then Q_0 (longest processing time first).
  const WorkItem lpt[] = {{0, 2}, {1, 2}, {0, 1}, {1, 1}, {0, 0}, {1, 0}};
  // Causal, 2 heads of 2^17 keys at D = 128 (64 MiB each, more than a 32 MiB section): one head
  // per section, so head 0's query blocks, heaviest first, then head 1's.
  const WorkItem lpt_one_head[] = {{0, 2}, {0, 1}, {0, 0}, {1, 2}, {1, 1}, {1, 0}};
  for (int t = 0; t < 6; ++t) {
    CAPTURE(t);
    CHECK(NonCausal::order(t, 3, 2, 512).bh == nc[t].bh);
    CHECK(NonCausal::order(t, 3, 2, 512).i == nc[t].i);
    CHECK(Causal::order(t, 3, 2, 512).bh == lpt[t].bh);
    CHECK(Causal::order(t, 3, 2, 512).i == lpt[t].i);
    CHECK(Causal::order(t, 3, 2, 1 << 17).bh == lpt_one_head[t].bh);
    CHECK(Causal::order(t, 3, 2, 1 << 17).i == lpt_one_head[t].i);
  }
  // Sections: 32 MiB / (2 * 2 B * 128 * 16384) = 4 heads of S = 16k per section; 6 heads leave a
  // last section of 2.
  CHECK(Causal::heads_per_section(16384, 6) == 4);
  CHECK(Causal::order(4 * 3, 3, 6, 16384).bh == 4);  // the last section's first item: head 4, Q_2
  CHECK(Causal::order(4 * 3, 3, 6, 16384).i == 2);
  CHECK(Causal::order(4 * 3 + 1, 3, 6, 16384).bh == 5);
}
