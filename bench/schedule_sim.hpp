// bench/schedule_sim.hpp — stage 08b's two walks of its scheduler's order, simulated on the CPU.
//
// A persistent grid of G blocks takes the work items t = 0 .. T-1 of a TileSchedulerTraits order
// (stages/08b_persistent/scheduler.cuh: order(), item_of_slot(), next_item(), the stage's own
// code) and runs each for a time that depends only on its query block: `fixed` plus its number of
// key tiles, Tc_i = ceil(kv_stop_i / Bc) (kv_stop_i = min(Skv, (i + 1) Br + Skv - Sq) under the
// bottom-right causal mask, Skv otherwise). The unit of time is one key tile of one work item.
//   static   block b runs item_of_slot(b, 0, G), item_of_slot(b, 1, G), ... back to back;
//   dynamic  block b runs item b, then next_item(kDynamic, ...) with the counter's old value. The
//            kernel's producer asks for the next item once it has issued the current item's
//            last loads, when the consumers are `lookahead` key tiles (the ring's stages) from
//            its end, or at its start for a shorter item; the block starts the item it got when
//            the current one ends. Blocks that ask at the same time ask in block order.
// What it leaves out, and the chapter says: the blocks' per-tile speed is taken as equal (no L2
// misses, no clock differences), and the fixed cost of an item is one number.
// Used by tests/cpu/test_schedule_sim.cpp and by bench/schedule-sim.cpp (the book's range and
// Gantt chart of stage 08b).
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "08b_persistent/scheduler.cuh"

namespace flashsteps::schedule_sim {

/// One item as a block ran it: which block, when, and the work item.
struct Run {
  int block;
  double start, end;
  std::int64_t t;
  hopper::WorkItem item;
};

struct Result {
  double makespan = 0;
  std::vector<Run> runs;  // in the order the items started (ties: block order)
};

/// The problem and the tile, as the kernel sees them.
struct Shape {
  std::int64_t bh = 1;  // B * H
  int sq = 1, skv = 1;
  int bc = 128;        // keys per tile (stages/08b_persistent/kernels.cuh: static_assert Bc == 128)
  double fixed = 0.0;  // an item's cost beyond its key tiles, in key tiles
  int lookahead = 0;   // dynamic: key tiles before an item's end at which its block asks again
};

/// Key tiles of query block i (Br rows) under the mask, as the kernel's tile loop counts them.
inline int key_tiles(int i, int br, const Shape& s, bool causal) {
  std::int64_t stop = s.skv;
  if (causal) stop = std::min<std::int64_t>(s.skv, std::int64_t{i + 1} * br + s.skv - s.sq);
  return stop <= 0 ? 0 : static_cast<int>((stop + s.bc - 1) / s.bc);
}

/// Simulates the walk `schedule` of Traits' order on a grid of `grid` blocks.
template <class Traits>
Result simulate(hopper::Schedule schedule, int grid, const Shape& s) {
  constexpr bool kCausal = Traits::kLpt;
  if (grid < 1 || s.bh < 1 || s.sq < 1 || s.skv < 1 || s.bc < 1 || s.fixed < 0 || s.lookahead < 0)
    throw std::invalid_argument(
        "schedule_sim: grid, B*H, Sq, Skv and Bc must be >= 1, the fixed "
        "cost and the lookahead >= 0");
  const int tr = (s.sq + Traits::Br - 1) / Traits::Br;
  const std::int64_t T = s.bh * tr;
  auto cost = [&](std::int64_t t) {
    const hopper::WorkItem w = Traits::order(static_cast<int>(t), tr, s.bh, s.skv);
    return std::pair{w, s.fixed + key_tiles(w.i, Traits::Br, s, kCausal)};
  };
  Result r;
  if (schedule == hopper::Schedule::kStatic) {
    for (int b = 0; b < grid; ++b) {
      double now = 0;
      for (int n = 0;; ++n) {
        const std::int64_t t = hopper::item_of_slot(b, n, grid);
        if (t >= T) break;
        const auto [w, c] = cost(t);
        r.runs.push_back({b, now, now + c, t, w});
        now += c;
      }
      r.makespan = std::max(r.makespan, now);
    }
    std::stable_sort(r.runs.begin(), r.runs.end(), [](const Run& a, const Run& b) {
      return a.start < b.start || (a.start == b.start && a.block < b.block);
    });
    return r;
  }
  // Dynamic: the blocks' requests for their next item, earliest first, then lowest block: (time
  // of the request, block, the end of the item it runs now).
  using Ask = std::tuple<double, int, double>;
  std::priority_queue<Ask, std::vector<Ask>, std::greater<Ask>> asks;
  auto start = [&](int b, std::int64_t t, double now) {
    const auto [w, c] = cost(t);
    r.runs.push_back({b, now, now + c, t, w});
    const double tiles = c - s.fixed;
    asks.push({now + c - std::min<double>(tiles, s.lookahead), b, now + c});
  };
  for (int b = 0; b < grid && b < T; ++b)
    start(b, b, 0.0);
  int counter = 0;
  while (!asks.empty()) {
    const int b = std::get<1>(asks.top());
    const double end = std::get<2>(asks.top());
    asks.pop();
    r.makespan = std::max(r.makespan, end);
    const std::int64_t t = hopper::next_item(hopper::Schedule::kDynamic, 0, grid, counter++);
    if (t < T) start(b, t, end);
  }
  std::stable_sort(r.runs.begin(), r.runs.end(), [](const Run& a, const Run& b) {
    return a.start < b.start || (a.start == b.start && a.block < b.block);
  });
  return r;
}

}  // namespace flashsteps::schedule_sim
