// emu/src/trace.cpp — the event trace of an emulated run (trace.hpp).
#include "trace.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "fsemu/access.hpp"
#include "fsemu/events.hpp"
#include "fsemu/scheduler.hpp"

namespace fsemu::trace {
namespace {

constexpr std::uintptr_t kLine = 64;  // bytes per recorded line of device memory

struct State {
  std::FILE* out = nullptr;
  std::map<std::uintptr_t, std::pair<int, std::size_t>> allocs;  // begin -> (id, bytes)
  int next_alloc = 0;
  int launch = -1;
  bool in_launch = false;
  std::uint64_t seq = 0;
  unsigned grid[3] = {1, 1, 1};
  int handle = -1;
  // The launch's uses: (kind, alloc) -> lines.
  std::map<std::pair<char, int>, std::set<std::uintptr_t>> uses;
  // Per block: (warp, kind, alloc, line) -> order of first touch; the block's next order.
  std::map<std::uint32_t, std::map<std::tuple<int, char, int, std::uintptr_t>, std::uint32_t>>
      touches;
  std::map<std::uint32_t, std::uint32_t> next_order;
};

State& state() {
  static State s = [] {
    State st;
    if (const char* path = std::getenv("FSEMU_TRACE"); path && *path) {
      st.out = std::fopen(path, "a");
      if (!st.out) std::fprintf(stderr, "fsemu: FSEMU_TRACE=%s cannot be opened; no trace\n", path);
    }
    return st;
  }();
  return s;
}

std::uint32_t block_id() {
  const ThreadInfo& t = self();
  return t.block_idx.x + t.grid_dim.x * (t.block_idx.y + t.grid_dim.y * t.block_idx.z);
}

void on_access(void*, const access::Access& a) {
  if (!in_thread()) return;
  State& s = state();
  const auto x = reinterpret_cast<std::uintptr_t>(a.addr);
  auto it = s.allocs.upper_bound(x);
  if (it == s.allocs.begin()) return;
  --it;
  if (x >= it->first + it->second.second) return;  // not device memory (shared, the stack)
  const int alloc = it->second.first;
  const char kind = a.atomic ? 'a' : a.write ? 'w' : 'r';
  const std::uintptr_t first = (x - it->first) / kLine;
  const std::uintptr_t last = (x - it->first + (a.size ? a.size : 1) - 1) / kLine;
  auto& lines = s.uses[{kind, alloc}];
  for (std::uintptr_t l = first; l <= last; ++l)
    lines.insert(l);
  if (kind == 'r') return;
  const std::uint32_t block = block_id();
  auto& mine = s.touches[block];
  for (std::uintptr_t l = first; l <= last; ++l)
    if (mine.emplace(std::tuple{self().warp, kind, alloc, l}, s.next_order[block]).second)
      ++s.next_order[block];
}

// The scheduler's barrier arrivals (bar.sync, bar.arrive, __syncthreads), by lane 0 of each warp.
class Barriers final : public events::Observer {
 public:
  void barrier(const events::Barrier& b) override {
    State& s = state();
    if (!s.out || !in_thread() || self().lane != 0) return;
    std::fprintf(s.out, "bar\t%llu\t%d\t%u\t%d\t%d\t%d\t%s\n",
                 static_cast<unsigned long long>(s.seq++), s.launch, block_id(), self().linear,
                 b.id, b.count, b.arrive ? "arrive" : "sync");
  }
};
Barriers g_barriers;
bool g_subscribed = false;

}  // namespace

bool enabled() {
  return state().out != nullptr;
}

void note_allocation(const void* p, std::size_t bytes) {
  State& s = state();
  if (!s.out || !p) return;
  const int id = s.next_alloc++;
  s.allocs[reinterpret_cast<std::uintptr_t>(p)] = {id, bytes};
  std::fprintf(s.out, "alloc\t%d\t%zu\n", id, bytes);
}

void launch_begin(const void* kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz) {
  State& s = state();
  if (!s.out) return;
  ++s.launch;
  s.in_launch = true;
  s.grid[0] = gx;
  s.grid[1] = gy;
  s.grid[2] = gz;
  std::string name = access::function_name(kernel);
  if (name.empty()) name = "?";
  std::fprintf(s.out, "launch\t%d\t%s\t%u\t%u\t%u\t%u\t%u\t%u\n", s.launch, name.c_str(), gx, gy,
               gz, bx, by, bz);
  s.uses.clear();
  s.touches.clear();
  s.next_order.clear();
  s.handle = access::attach(on_access, nullptr);
  if (!g_subscribed) {
    events::subscribe(&g_barriers);
    g_subscribed = true;
  }
}

void launch_end() {
  State& s = state();
  if (!s.out || !s.in_launch) return;
  access::detach(s.handle);
  s.handle = -1;
  s.in_launch = false;
  for (const auto& [key, lines] : s.uses) {
    // Runs of consecutive lines.
    auto it = lines.begin();
    while (it != lines.end()) {
      const std::uintptr_t lo = *it;
      std::uintptr_t hi = lo;
      for (++it; it != lines.end() && *it == hi + 1; ++it)
        hi = *it;
      std::fprintf(s.out, "use\t%d\t%c\t%d\t%zu\t%zu\n", s.launch, key.first, key.second,
                   static_cast<std::size_t>(lo * kLine),
                   static_cast<std::size_t>((hi + 1) * kLine));
    }
  }
  for (const auto& [block, mine] : s.touches)
    for (const auto& [key, order] : mine)
      std::fprintf(s.out, "touch\t%d\t%u\t%d\t%c\t%d\t%zu\t%u\n", s.launch, block, std::get<0>(key),
                   std::get<1>(key), std::get<2>(key), static_cast<std::size_t>(std::get<3>(key)),
                   order);
  s.uses.clear();
  s.touches.clear();
  std::fflush(s.out);
}

void mbarrier(const char* op, std::uint32_t addr, std::uint32_t phase, std::int64_t value) {
  State& s = state();
  if (!s.out || !in_thread()) return;
  std::fprintf(s.out, "mbar\t%llu\t%d\t%u\t%d\t%s\t%u\t%u\t%lld\n",
               static_cast<unsigned long long>(s.seq++), s.launch, block_id(), self().linear, op,
               addr, phase, static_cast<long long>(value));
}

}  // namespace fsemu::trace
