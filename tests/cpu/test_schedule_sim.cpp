// The simulation of stage 08b's two walks (bench/schedule_sim.hpp, over the stage's own
// scheduler.cuh), from which the book takes 08b's static-against-dynamic range and its Gantt chart
// (bench/schedule-sim.cpp): on problems small enough to schedule by hand it must give the
// makespans worked out below, and on the bench's shapes it must keep the properties any such
// schedule has (every item run once, no block running two at a time, Graham's bound for list
// scheduling).
#include "flashsteps_catch.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "schedule_sim.hpp"

using namespace flashsteps;
using flashsteps::hopper::Schedule;

namespace {

using Causal128 = hopper::TileSchedulerTraits<128, 128, true>;
using Plain128 = hopper::TileSchedulerTraits<128, 128, false>;

schedule_sim::Shape shape(std::int64_t bh, int s, double fixed = 0, int lookahead = 0) {
  schedule_sim::Shape x;
  x.bh = bh;
  x.sq = x.skv = s;
  x.fixed = fixed;
  x.lookahead = lookahead;
  return x;
}

}  // namespace

TEST_CASE("schedule simulation: makespans worked out by hand", "[schedule_sim]") {
  // One head, S = 512: four query blocks; causal, Q_3 costs 4 key tiles, Q_2 3, Q_1 2, Q_0 1, and
  // the LPT order is Q_3, Q_2, Q_1, Q_0. Two blocks.
  //   static:  block 0 runs Q_3 then Q_1 (4 + 2 = 6), block 1 Q_2 then Q_0 (3 + 1 = 4): 6.
  //   dynamic: block 1 is free at 3 and takes Q_1 (3..5), block 0 at 4 takes Q_0 (4..5): 5.
  CHECK(schedule_sim::simulate<Causal128>(Schedule::kStatic, 2, shape(1, 512)).makespan == 6);
  CHECK(schedule_sim::simulate<Causal128>(Schedule::kDynamic, 2, shape(1, 512)).makespan == 5);
  // With a fixed cost of 1 tile per item: static 5 + 3 = 8 against 4 + 2 = 6; dynamic: block 1
  // free at 4 takes Q_1 (4..7), block 0 free at 5 takes Q_0 (5..7): 7.
  CHECK(schedule_sim::simulate<Causal128>(Schedule::kStatic, 2, shape(1, 512, 1)).makespan == 8);
  CHECK(schedule_sim::simulate<Causal128>(Schedule::kDynamic, 2, shape(1, 512, 1)).makespan == 7);
  // Asking 3 tiles ahead: block 1 asks at 0 (its Q_2 is 3 tiles), block 0 at 1: block 1 gets Q_1
  // (3..5) and asks again at 3, block 0 gets Q_0 (4..5): still 5.
  CHECK(schedule_sim::simulate<Causal128>(Schedule::kDynamic, 2, shape(1, 512, 0, 3)).makespan ==
        5);
  // Three heads of S = 256 (Q_1 costs 2, Q_0 1), one section: Q_1 of heads 0, 1, 2, then Q_0 of
  // heads 0, 1, 2. Two blocks, static: block 0 takes items 0, 2, 4 (2 + 2 + 1 = 5), block 1 items
  // 1, 3, 5 (2 + 1 + 1 = 4): 5. Dynamic: both blocks are free at 2 and ask in block order: block
  // 0 takes item 2 (2..4), block 1 item 3 (2..3); block 1 takes 4 (3..4); at 4 both are free
  // again and block 0, asking first, takes 5 (4..5): 5.
  const auto st = schedule_sim::simulate<Causal128>(Schedule::kStatic, 2, shape(3, 256));
  const auto dy = schedule_sim::simulate<Causal128>(Schedule::kDynamic, 2, shape(3, 256));
  CHECK(st.makespan == 5);
  CHECK(dy.makespan == 5);
  REQUIRE(dy.runs.size() == 6);
  CHECK(dy.runs.back().block == 0);
  CHECK(dy.runs.back().t == 5);
  // Non-causal, S = 640: five query blocks of Tc = 5 key tiles each on 2 blocks: 3 rounds, 15.
  CHECK(schedule_sim::simulate<Plain128>(Schedule::kStatic, 2, shape(1, 640)).makespan == 15);
  CHECK(schedule_sim::simulate<Plain128>(Schedule::kDynamic, 2, shape(1, 640)).makespan == 15);
}

TEST_CASE("schedule simulation: every item once, one at a time per block, Graham's bound",
          "[schedule_sim]") {
  struct Case {
    std::int64_t bh;
    int s, grid;
    double fixed;
    int lookahead;
  };
  // The bench's causal shapes at D = 128 (B*S = 16k, H = 16) on 132 blocks, and small grids.
  const std::vector<Case> cases = {{512, 512, 132, 0, 3},  {128, 2048, 132, 0, 3},
                                   {16, 16384, 132, 2, 3}, {16, 16384, 7, 0, 0},
                                   {3, 1000, 1, 0, 3},     {5, 300, 200, 1, 3}};
  for (const Case& c : cases) {
    const auto sh = shape(c.bh, c.s, c.fixed, c.lookahead);
    const int tr = (c.s + 127) / 128;
    const std::int64_t T = c.bh * tr;
    for (Schedule walk : {Schedule::kStatic, Schedule::kDynamic}) {
      CAPTURE(c.bh, c.s, c.grid, c.fixed, c.lookahead, static_cast<int>(walk));
      const auto r = schedule_sim::simulate<Causal128>(walk, c.grid, sh);
      REQUIRE(static_cast<std::int64_t>(r.runs.size()) == T);
      std::vector<int> seen(static_cast<std::size_t>(T), 0);
      std::map<int, std::vector<std::pair<double, double>>> by_block;
      double total = 0, longest = 0;
      for (const auto& run : r.runs) {
        ++seen[static_cast<std::size_t>(run.t)];
        by_block[run.block].push_back({run.start, run.end});
        total += run.end - run.start;
        longest = std::max(longest, run.end - run.start);
        // The item's time: its key tiles under the mask, plus the fixed cost.
        CHECK(run.end - run.start == c.fixed + std::min(run.item.i + 1, (c.s + 127) / 128));
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
      for (auto& [b, spans] : by_block) {
        std::sort(spans.begin(), spans.end());
        for (std::size_t k = 1; k < spans.size(); ++k)
          CHECK(spans[k].first >= spans[k - 1].second);
        CHECK(spans.back().second <= r.makespan);
      }
      CHECK(r.makespan >= total / c.grid);
      // A list schedule, which the dynamic walk is when a block asks only once it is free, ends
      // within the mean load plus the longest item (Graham 1966).
      if (walk == Schedule::kDynamic && c.lookahead == 0)
        CHECK(r.makespan <= total / c.grid + longest);
    }
  }
}

TEST_CASE("schedule simulation: bad shapes are refused", "[schedule_sim]") {
  CHECK_THROWS_AS(schedule_sim::simulate<Causal128>(Schedule::kStatic, 0, shape(1, 512)),
                  std::invalid_argument);
  CHECK_THROWS_AS(schedule_sim::simulate<Causal128>(Schedule::kDynamic, 2, shape(1, 0)),
                  std::invalid_argument);
  CHECK_THROWS_AS(schedule_sim::simulate<Causal128>(Schedule::kDynamic, 2, shape(1, 512, -1)),
                  std::invalid_argument);
}
