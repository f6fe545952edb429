// bench/schedule-sim.cpp — fs_schedule_sim: stage 08b's static and dynamic walks of its causal
// order, simulated on the CPU (bench/schedule_sim.hpp, which runs the stage's own scheduler.cuh),
// for the book.
//
//   fs_schedule_sim --grid G --out DIR
//
// G is the persistent grid, one block per SM (the committed run's SM count, which
// book/generate.cmake reads from its provenance.json). Writes into DIR:
//   schedule_08b.md        the bench's causal shapes (B*S = 16k, H*D = 2048, S = 512 .. 16k,
//                          D = 64 and 128): the makespan of each walk and their ratio, with an
//                          item's fixed cost at 0 and at 2 key tiles
//   schedule_08b_range.md  one sentence: the ratio's range at S = 2k .. 16k for each D
//   schedule_gantt.dat     both walks at D = 128, S = 16k, causal, as gnuplot reads them
//                          (bench/plots/schedule_gantt.gp): one block of rows per walk, a row per
//                          item: block, start, end, query block i, section
// Exit 0, or 2 with a message for bad arguments.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "schedule_sim.hpp"

namespace fs = std::filesystem;
using namespace flashsteps;

namespace {

constexpr int kBr = 128;        // stages/08b_persistent/kernels.cuh: HopperTraits::Br
constexpr int kTokens = 16384;  // the bench's shapes: B * S = 16k, H * D = 2048
constexpr int kHidden = 2048;
constexpr double kFixed[2] = {0.0, 2.0};  // an item's fixed cost, in key tiles (the chapter: why)

// The ring's stages (kernels.cuh: TileD64 has 4, TileD128 3): how far ahead the producer asks.
constexpr int stages_of(int d) {
  return d == 64 ? 4 : 3;
}

template <int D>
double ratio(int S, double fixed, int grid, double* st = nullptr, double* dy = nullptr,
             int* hs = nullptr) {
  using Traits = hopper::TileSchedulerTraits<kBr, D, true>;
  schedule_sim::Shape s;
  s.bh = std::int64_t{kTokens / S} * (kHidden / D);
  s.sq = s.skv = S;
  s.fixed = fixed;
  s.lookahead = stages_of(D);
  const double a = schedule_sim::simulate<Traits>(hopper::Schedule::kStatic, grid, s).makespan;
  const double b = schedule_sim::simulate<Traits>(hopper::Schedule::kDynamic, grid, s).makespan;
  if (st) *st = a;
  if (dy) *dy = b;
  if (hs) *hs = Traits::heads_per_section(S, s.bh);
  return a / b;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

template <int D>
void table_rows(std::ostream& md, int grid, double& lo, double& hi) {
  for (int S = 512; S <= 16384; S *= 2) {
    double st[2], dy[2], r[2];
    int hs = 0;
    for (int k = 0; k < 2; ++k)
      r[k] = ratio<D>(S, kFixed[k], grid, &st[k], &dy[k], &hs);
    const int tr = S / kBr;
    const std::int64_t bh = std::int64_t{kTokens / S} * (kHidden / D);
    md << "| " << D << " | " << S << " | " << bh << " | " << tr << " | " << hs << " | " << bh * tr
       << " | " << fmt("%.0f", st[0]) << " | " << fmt("%.0f", dy[0]) << " | " << fmt("%.3f", r[0])
       << " | " << fmt("%.3f", r[1]) << " |\n";
    if (S >= 2048) {
      lo = std::min({lo, r[0], r[1]});
      hi = std::max({hi, r[0], r[1]});
    }
  }
}

void gantt(std::ostream& out, int grid) {
  constexpr int D = 128, S = 16384;
  using Traits = hopper::TileSchedulerTraits<kBr, D, true>;
  schedule_sim::Shape s;
  s.bh = std::int64_t{kTokens / S} * (kHidden / D);
  s.sq = s.skv = S;
  s.lookahead = stages_of(D);
  const int hs = Traits::heads_per_section(S, s.bh);
  const char* names[2] = {"static", "dynamic"};
  const hopper::Schedule walks[2] = {hopper::Schedule::kStatic, hopper::Schedule::kDynamic};
  for (int k = 0; k < 2; ++k) {
    const auto r = schedule_sim::simulate<Traits>(walks[k], grid, s);
    out << (k ? "\n\n" : "") << "# " << names[k] << ": D = " << D << ", S = " << S
        << ", B*H = " << s.bh << ", causal, G = " << grid << ", makespan " << r.makespan
        << " key tiles\n# block start end i section\n";
    for (const auto& run : r.runs)
      out << run.block << ' ' << run.start << ' ' << run.end << ' ' << run.item.i << ' '
          << run.item.bh / hs << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  int grid = 0;
  std::string out;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--grid" && a + 1 < argc) {
      grid = std::atoi(argv[++a]);
    } else if (arg == "--out" && a + 1 < argc) {
      out = argv[++a];
    } else {
      std::cerr << "fs_schedule_sim: unknown argument '" << arg << "'; usage: fs_schedule_sim "
                << "--grid G --out DIR\n";
      return 2;
    }
  }
  if (grid < 1 || grid > 100000 || out.empty() || !fs::is_directory(out)) {
    std::cerr << "fs_schedule_sim: --grid must be 1 .. 100000 (one block per SM) and --out an "
                 "existing folder\n";
    return 2;
  }
  std::ofstream md(fs::path(out) / "schedule_08b.md");
  md << "| D | S | B·H | T_r | heads per section | items | static | dynamic | static / dynamic "
        "| the same, 2 tiles fixed per item "
        "|\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  double lo[2] = {1e9, 1e9}, hi[2] = {0, 0};
  table_rows<64>(md, grid, lo[0], hi[0]);
  table_rows<128>(md, grid, lo[1], hi[1]);
  md << "\nCausal, <i>G</i> = " << grid << " persistent blocks (the run's SM count); the static "
     << "and dynamic columns are the makespans in key tiles, with no fixed cost per item. "
     << "Written by `fs_schedule_sim` (bench/schedule-sim.cpp) from the stage's scheduler.cuh.\n";
  std::ofstream range(fs::path(out) / "schedule_08b_range.md");
  range << "**Simulated:** under the causal mask, at S = 2k–16k on " << grid
        << " blocks, the static walk takes " << fmt("%.2f", lo[1]) << "–" << fmt("%.2f", hi[1])
        << " times the dynamic walk's time at D = 128 and " << fmt("%.2f", lo[0]) << "–"
        << fmt("%.2f", hi[0]) << " times at D = 64 (fixed cost per item 0 to 2 key "
        << "tiles).\n";
  std::ofstream dat(fs::path(out) / "schedule_gantt.dat");
  gantt(dat, grid);
  return md && range && dat ? 0 : 1;
}
