// emu/src/profile.cpp — the counters behind fsemu/profile.hpp: instructions by class, shared-
// memory wavefronts and bank conflicts, global sectors, per kernel launch. The rules are stated in
// emu/README.md ("Counting"); this file is their one implementation.
#include "profile.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fsemu/access.hpp"
#include "fsemu/events.hpp"
#include "fsemu/profile.hpp"
#include "fsemu/scheduler.hpp"

namespace fsemu::profile {

bool g_on = false;

namespace {

// ---------------------------------------------------------------------------------------------
// The raw counters of one launch (before scaling).
enum C : int {
  kMma,        // mma.sync.m16n8k16 (HMMA.16816)
  kWmmaMma,    // wmma::mma_sync m16n16k16 (two HMMA.16816)
  kWmmaLoad,   // wmma::load_matrix_sync
  kWmmaStore,  // wmma::store_matrix_sync
  kWgmma64,    // wgmma.mma_async m64nNk16 by N: kWgmma64 + N/8 - 1 (N = 8..256)
  kWgmmaEnd = kWgmma64 + 32,
  kWgmmaSmemBytes,  // operand bytes wgmma reads from shared memory (async proxy, not LSU)
  kLdsm1,
  kLdsm2,
  kLdsm4,
  kLdsmWavefronts,
  kLdsmIdeal,
  kShLd1,  // ordinary shared loads by width 1, 2, 4, 8, 16 bytes
  kShLd16 = kShLd1 + 4,
  kShSt1,
  kShSt16 = kShSt1 + 4,
  kShLdWavefronts,
  kShLdIdeal,
  kShStWavefronts,
  kShStIdeal,
  kGlLd1,
  kGlLd16 = kGlLd1 + 4,
  kGlSt1,
  kGlSt16 = kGlSt1 + 4,
  kGlLdSectors,
  kGlStSectors,
  kCp4,  // cp.async by size 4, 8, 16 (as kShLd1 + log2: index 2, 3, 4)
  kCp16 = kCp4 + 2,
  kCpWavefronts,  // the shared-memory writes of cp.async (LDGSTS)
  kCpIdeal,
  kCpSectors,  // global sectors cp.async reads
  kGlAtom,     // atomics on global memory (atom/red: ATOM, RED), per warp
  kGlAtomSectors,
  kShAtom,  // atomics on shared memory (ATOMS)
  kTmaLoad,
  kTmaLoadBytes,
  kTmaStore,
  kTmaStoreBytes,
  kShfl,
  kVote,
  kSyncwarp,
  kBarSync,
  kBarNamedSync,
  kBarArrive,
  kMbarWait,
  kMbarArrive,
  kWarps,  // warps run
  kCounters
};
std::array<std::uint64_t, kCounters> g_c{};

int log2_width(std::size_t bytes) {
  switch (bytes) {
    case 1:
      return 0;
    case 2:
      return 1;
    case 4:
      return 2;
    case 8:
      return 3;
    default:
      return 4;  // 16 (wider accesses of the host compiler are split by the hooks)
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared-memory wavefronts: 32 banks of 4 bytes. A warp-wide access of `width` bytes per lane is
// served in phases of 128 / max(width, 4) lanes (32 lanes up to 4 bytes, 16 for 8 bytes, 8 for
// 16 bytes); a phase needs as many wavefronts as the most distinct 4-byte words any one bank
// holds among its lanes' bytes (lanes reading the same word share it). Ideal: one per phase
// with an active lane. ldmatrix: each 8-address phase (16 bytes per address) likewise.
Wavefronts shared_wavefronts(const std::uint32_t* addr, const std::uint8_t* size,
                             std::uint32_t mask, int width) {
  const int per_phase = 128 / std::max(width, 4);
  Wavefronts w;
  for (int p = 0; p < 32; p += per_phase) {
    std::uint32_t words[32 * 4];
    int n = 0;
    for (int l = p; l < p + per_phase; ++l) {
      if (!(mask >> l & 1u)) continue;
      for (std::uint32_t a = addr[l] / 4; a <= (addr[l] + size[l] - 1) / 4; ++a)
        words[n++] = a;
    }
    if (n == 0) continue;
    std::sort(words, words + n);
    n = static_cast<int>(std::unique(words, words + n) - words);
    int per_bank[32] = {};
    int most = 0;
    for (int i = 0; i < n; ++i)
      most = std::max(most, ++per_bank[words[i] % 32]);
    w.total += static_cast<std::uint64_t>(most);
    ++w.ideal;
  }
  return w;
}

namespace {

std::uint64_t sectors(const std::uint64_t* addr, const std::uint8_t* size, std::uint32_t mask) {
  std::uint64_t s[64];
  int n = 0;
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u) || size[l] == 0) continue;
    for (std::uint64_t a = addr[l] / 32; a <= (addr[l] + size[l] - 1) / 32; ++a)
      if (n < 64) s[n++] = a;
  }
  std::sort(s, s + n);
  return static_cast<std::uint64_t>(std::unique(s, s + n) - s);
}

// ---------------------------------------------------------------------------------------------
// Grouping per-thread events into warp instructions. The emulator runs a warp's lanes one after
// another, each as far as the next synchronisation; so lane l's k-th event at a site since the
// warp last converged belongs to the same warp instruction as every other lane's k-th event at
// that site. A group is counted once every lane of the warp joined it, or at the next
// convergence (a barrier or warp-collective all lanes reached) with the lanes that did.
enum class Kind : std::uint8_t { sh_ld, sh_st, gl_ld, gl_st, cp_async, sync, sh_atom, gl_atom };
struct Group {
  std::uint32_t mask = 0;
  Kind kind{};
  std::uint8_t sync = 0;
  std::uint8_t size[32];      // bytes per lane (cp.async: to shared)
  std::uint8_t src_size[32];  // cp.async: bytes read from global
  std::uint32_t saddr[32];    // shared address
  std::uint64_t gaddr[32];    // global address
};
struct Site {
  std::deque<Group> q;
  std::uint64_t base = 0;  // occurrence number of q.front()
};
// A lane's ordinary accesses are held back while each continues the last one (the next
// address, same space and direction, at most 16 bytes in all): the host compiler copies a
// uint4 or a float4 member by member, where nvcc emits one 16-byte instruction. The pieces go out
// as one access when they form an aligned 2-, 4-, 8- or 16-byte access, else one by one.
struct Pending {
  Kind kind{};
  std::uint64_t addr = 0;  // shared address or global address
  int total = 0;           // bytes; 0: nothing held
  int n = 0;
  const void* site[16];
  std::uint8_t size[16];
};
struct Warp {
  std::unordered_map<std::uint64_t, Site> sites;
  std::vector<std::unordered_map<std::uint64_t, std::uint64_t>> next;  // per lane
  std::vector<Pending> pending;                                        // per lane
  int lanes = 32;
};
struct BlockState {
  std::vector<Warp> warps;
};
BlockState g_block;

void count_group(const Group& g) {
  const int width = [&] {
    int w = 0;
    for (int l = 0; l < 32; ++l)
      if (g.mask >> l & 1u) w = std::max<int>(w, g.size[l]);
    return w;
  }();
  switch (g.kind) {
    case Kind::sh_ld:
    case Kind::sh_st: {
      const bool st = g.kind == Kind::sh_st;
      ++g_c[(st ? kShSt1 : kShLd1) + log2_width(static_cast<std::size_t>(width))];
      const Wavefronts w = shared_wavefronts(g.saddr, g.size, g.mask, width);
      g_c[st ? kShStWavefronts : kShLdWavefronts] += w.total;
      g_c[st ? kShStIdeal : kShLdIdeal] += w.ideal;
      break;
    }
    case Kind::gl_ld:
    case Kind::gl_st: {
      const bool st = g.kind == Kind::gl_st;
      ++g_c[(st ? kGlSt1 : kGlLd1) + log2_width(static_cast<std::size_t>(width))];
      g_c[st ? kGlStSectors : kGlLdSectors] += sectors(g.gaddr, g.size, g.mask);
      break;
    }
    case Kind::cp_async: {
      ++g_c[kCp4 + log2_width(static_cast<std::size_t>(width)) - 2];
      const Wavefronts w = shared_wavefronts(g.saddr, g.size, g.mask, width);
      g_c[kCpWavefronts] += w.total;
      g_c[kCpIdeal] += w.ideal;
      g_c[kCpSectors] += sectors(g.gaddr, g.src_size, g.mask);
      break;
    }
    case Kind::sync:
      ++g_c[kBarSync + g.sync];
      break;
    case Kind::sh_atom:
      ++g_c[kShAtom];
      break;
    case Kind::gl_atom:
      ++g_c[kGlAtom];
      g_c[kGlAtomSectors] += sectors(g.gaddr, g.size, g.mask);
      break;
  }
}

void flush_pending(Warp& w, int lane);

void flush_warp(Warp& w) {
  for (int l = 0; l < w.lanes; ++l)
    flush_pending(w, l);
  for (auto& [key, site] : w.sites)
    for (const Group& g : site.q)
      if (g.mask) count_group(g);
  w.sites.clear();
  for (auto& n : w.next)
    n.clear();
}

// Lane `lane`'s event: fills its group, and counts the groups it completes.
template <class Fill>
void lane_event(Warp& w, int lane, const void* site, Kind kind, Fill&& fill) {
  const std::uint64_t key = reinterpret_cast<std::uintptr_t>(site) ^
                            (std::uint64_t{static_cast<std::uint8_t>(kind)} << 56);
  const std::uint64_t k = w.next[static_cast<std::size_t>(lane)][key]++;
  Site& s = w.sites[key];
  const std::uint64_t pos = k - s.base;
  while (s.q.size() <= pos)
    s.q.emplace_back();
  Group& g = s.q[pos];
  g.kind = kind;
  g.mask |= 1u << lane;
  fill(g, lane);
  // Count the groups at the front that every lane has joined.
  const std::uint32_t all = w.lanes == 32 ? 0xffffffffu : (1u << w.lanes) - 1;
  while (!s.q.empty() && s.q.front().mask == all) {
    count_group(s.q.front());
    s.q.pop_front();
    ++s.base;
  }
}

void access_event(Warp& w, int lane, const void* site, Kind kind, std::uint64_t addr, int size) {
  const bool shared = kind == Kind::sh_ld || kind == Kind::sh_st;
  lane_event(w, lane, site, kind, [&](Group& g, int l) {
    g.size[l] = static_cast<std::uint8_t>(size);
    if (shared)
      g.saddr[l] = static_cast<std::uint32_t>(addr);
    else
      g.gaddr[l] = addr;
  });
}

void flush_pending(Warp& w, int lane) {
  Pending& p = w.pending[static_cast<std::size_t>(lane)];
  if (p.total == 0) return;
  const bool vector =
      (p.total & (p.total - 1)) == 0 && p.addr % static_cast<unsigned>(p.total) == 0;
  if (vector) {
    access_event(w, lane, p.site[0], p.kind, p.addr, p.total);
  } else {
    std::uint64_t a = p.addr;
    for (int i = 0; i < p.n; ++i) {
      access_event(w, lane, p.site[i], p.kind, a, p.size[i]);
      a += p.size[i];
    }
  }
  p.total = 0;
  p.n = 0;
}

Warp* calling_warp() {
  const ThreadInfo& t = self();
  if (static_cast<std::size_t>(t.warp) >= g_block.warps.size()) return nullptr;
  return &g_block.warps[static_cast<std::size_t>(t.warp)];
}

// The calling thread's event (not an ordinary access): its held-back access goes first.
template <class Fill>
void event(const void* site, Kind kind, Fill&& fill) {
  Warp* w = calling_warp();
  if (!w) return;
  flush_pending(*w, self().lane);
  lane_event(*w, self().lane, site, kind, std::forward<Fill>(fill));
}

void hold_access(const void* site, Kind kind, std::uint64_t addr, std::size_t bytes) {
  Warp* w = calling_warp();
  if (!w) return;
  const int lane = self().lane;
  const int size = static_cast<int>(std::min<std::size_t>(bytes, 16));
  Pending& p = w->pending[static_cast<std::size_t>(lane)];
  if (p.total > 0 &&
      (p.kind != kind || addr != p.addr + static_cast<unsigned>(p.total) || p.total + size > 16))
    flush_pending(*w, lane);
  if (p.total == 0) {
    p.kind = kind;
    p.addr = addr;
  }
  p.site[p.n] = site;
  p.size[p.n] = static_cast<std::uint8_t>(size);
  ++p.n;
  p.total += size;
}

// ---------------------------------------------------------------------------------------------
// The executable's own symbol table (the kernels are in anonymous namespaces: not in the dynamic
// symbol table): kernel names, and where the static `__shared__` arrays are.
struct Symbol {
  std::string name;  // mangled
  std::uintptr_t addr;
  std::size_t size;
  bool function;
};
const std::vector<Symbol>& symbols() {
  static const std::vector<Symbol> all = [] {
    std::vector<Symbol> out;
    std::uintptr_t bias = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* to) {
          *static_cast<std::uintptr_t*>(to) = info->dlpi_addr;
          return 1;  // the first object is the executable
        },
        &bias);
    std::ifstream f("/proc/self/exe", std::ios::binary);
    const std::vector<char> elf((std::istreambuf_iterator<char>(f)),
                                std::istreambuf_iterator<char>());
    if (elf.size() < sizeof(Elf64_Ehdr)) return out;
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(elf.data());
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(elf.data() + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB) continue;
      const auto* sym = reinterpret_cast<const Elf64_Sym*>(elf.data() + sh[i].sh_offset);
      const char* str = elf.data() + sh[sh[i].sh_link].sh_offset;
      for (std::size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); ++j) {
        const int type = ELF64_ST_TYPE(sym[j].st_info);
        if (type != STT_FUNC && type != STT_OBJECT) continue;
        out.push_back(
            Symbol{str + sym[j].st_name, bias + sym[j].st_value, sym[j].st_size, type == STT_FUNC});
      }
    }
    return out;
  }();
  return all;
}

std::string symbol_name(const void* fn) {
  static std::map<const void*, std::string> cache;
  if (auto it = cache.find(fn); it != cache.end()) return it->second;
  std::string name;
  for (const Symbol& s : symbols())
    if (s.function && s.addr == reinterpret_cast<std::uintptr_t>(fn)) name = s.name;
  if (name.empty()) {
    std::ostringstream s;
    s << "kernel at " << fn;
    name = s.str();
  } else if (int status = 0;
             char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status)) {
    name = d;
    std::free(d);
  }
  return cache[fn] = name;
}

// Memory a kernel's accesses are classified by: device allocations (global), and the static
// `__shared__` arrays, which the shim makes function-local statics outside the shared window
// (mangled _ZZ...: no emulated program has other function-local statics that a kernel touches).
// Their shared "address" is the host address: bank conflicts depend only on the addresses of one
// access relative to each other, and a 4-byte-aligned array keeps them.
std::map<std::uintptr_t, std::size_t> g_allocations;
const std::map<std::uintptr_t, std::size_t>& static_shared() {
  static const std::map<std::uintptr_t, std::size_t> ranges = [] {
    std::map<std::uintptr_t, std::size_t> out;
    for (const Symbol& s : symbols())
      if (!s.function && s.size > 0 && s.name.rfind("_ZZ", 0) == 0) out[s.addr] = s.size;
    return out;
  }();
  return ranges;
}
bool in(const std::map<std::uintptr_t, std::size_t>& ranges, const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = ranges.upper_bound(a);
  if (it == ranges.begin()) return false;
  --it;
  return a < it->first + it->second;
}

// ---------------------------------------------------------------------------------------------
Options g_options;
std::vector<Launch> g_launches;
Launch g_current;
std::chrono::steady_clock::time_point g_start;

const char* const kWidthNames[5] = {"8", "16", "32", "64", "128"};

}  // namespace

const std::vector<Launch>& launches() {
  return g_launches;
}

void note_allocation(const void* p, std::size_t bytes) {
  if (p) g_allocations[reinterpret_cast<std::uintptr_t>(p)] = bytes;
}
void note_free(const void* p) {
  g_allocations.erase(reinterpret_cast<std::uintptr_t>(p));
}

void launch_begin(const void* kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz, std::size_t smem) {
  if (!g_on) return;
  g_c.fill(0);
  g_current = Launch{};
  g_current.kernel = symbol_name(kernel);
  g_current.grid[0] = gx;
  g_current.grid[1] = gy;
  g_current.grid[2] = gz;
  g_current.block[0] = bx;
  g_current.block[1] = by;
  g_current.block[2] = bz;
  g_current.dynamic_smem = smem;
  g_current.blocks = std::uint64_t{gx} * gy * gz;
  g_start = std::chrono::steady_clock::now();
}

bool run_block(std::uint64_t id, std::uint64_t blocks) {
  if (!g_on || g_options.sample_blocks == 0 || g_options.sample_blocks >= blocks) return true;
  // Block id runs when it is the first of its share: floor(k * blocks / n) for k = 0..n-1.
  const std::uint64_t n = g_options.sample_blocks;
  const std::uint64_t k = (id * n + n - 1) / blocks;  // the least k with k*blocks/n >= id
  return k < n && k * blocks / n == id;
}

namespace {

// A block begins, ends; every lane of warp `warp` (or every thread of the block) reached the same
// synchronisation: the per-lane occurrence counts of the grouping start again (README).
void block_begin(int threads) {
  if (!g_on) return;
  const int warps = (threads + 31) / 32;
  g_block.warps.assign(static_cast<std::size_t>(warps), Warp{});
  for (int i = 0; i < warps; ++i) {
    Warp& w = g_block.warps[static_cast<std::size_t>(i)];
    w.lanes = std::min(32, threads - 32 * i);
    w.next.resize(static_cast<std::size_t>(w.lanes));
    w.pending.resize(static_cast<std::size_t>(w.lanes));
  }
  g_c[kWarps] += static_cast<std::uint64_t>(warps);
  ++g_current.blocks_run;
}
void block_end() {
  if (!g_on) return;
  for (Warp& w : g_block.warps)
    flush_warp(w);
  g_block.warps.clear();
}
void warp_converged(int warp) {
  if (!g_on || static_cast<std::size_t>(warp) >= g_block.warps.size()) return;
  flush_warp(g_block.warps[static_cast<std::size_t>(warp)]);
}
void block_converged() {
  if (!g_on) return;
  for (Warp& w : g_block.warps)
    flush_warp(w);
}

// The scheduler's events (fsemu/events.hpp), observed from enable() on.
class SchedulerEvents final : public events::Observer {
 public:
  void block_begin(const events::Block& b) override { profile::block_begin(b.threads); }
  void block_end() override { profile::block_end(); }
  // A parked block's lane groups wait aside until it resumes (fsemu/events.hpp).
  void block_park(const events::Block& b) override {
    if (g_on) parked_[b.key()] = std::exchange(g_block, BlockState{});
  }
  void block_resume(const events::Block& b) override {
    const auto it = parked_.find(b.key());
    if (it == parked_.end()) return;
    g_block = std::move(it->second);
    parked_.erase(it);
  }
  void barrier(const events::Barrier& b) override {
    sync(b.site, b.arrive ? Sync::bar_arrive : b.all ? Sync::bar_sync : Sync::bar_named_sync);
  }
  void block_converged() override { profile::block_converged(); }
  void warp_converged(int warp) override { profile::warp_converged(warp); }

 private:
  std::map<std::uint64_t, BlockState> parked_;
};
SchedulerEvents g_events;

}  // namespace

void enable(const Options& options) {
  g_options = options;
  if (!g_on) {  // every ordinary load and store of the kernels (fsemu/access.hpp)
    fsemu::access::attach(
        [](void*, const fsemu::access::Access& a) {
          if (in_thread()) access(a.pc, a.addr, a.size, a.write, a.atomic);
        },
        nullptr);
    events::subscribe(&g_events);  // the scheduler's blocks, barriers and convergences
  }
  g_on = true;
}
bool enabled() {
  return g_on;
}

void warp_op(Op op) {
  if (!g_on) return;
  switch (op) {
    case Op::shfl:
      ++g_c[kShfl];
      break;
    case Op::vote:
      ++g_c[kVote];
      break;
    case Op::syncwarp:
      ++g_c[kSyncwarp];
      break;
    case Op::mma_m16n8k16:
      ++g_c[kMma];
      break;
    case Op::wmma_mma:
      ++g_c[kWmmaMma];
      break;
  }
}

void ldmatrix(int count, const std::uint32_t* addrs) {
  if (!g_on) return;
  ++g_c[count == 1 ? kLdsm1 : count == 2 ? kLdsm2 : kLdsm4];
  std::uint8_t size[32];
  std::fill(size, size + 32, std::uint8_t{16});
  const std::uint32_t mask = count >= 4 ? 0xffffffffu : (1u << (8 * count)) - 1;
  const Wavefronts w = shared_wavefronts(addrs, size, mask, 16);
  g_c[kLdsmWavefronts] += w.total;
  g_c[kLdsmIdeal] += w.ideal;
}

// WMMA m16n16k16 moves, counted as the instructions the hardware's fragment layout implies
// (the SASS of stage 02 holds LDSM.16.M88.4 / LDSM.16.MT88.4 for its 16-bit loads):
// - a 16-bit load from shared memory: one ldmatrix .x4, whose four 8-address phases are the
//   tile's four 8-row x 16-byte quarters in memory;
// - a 32-bit (accumulator) store or load, row-major: four 8-byte accesses per lane, lane l at
//   row l/4 (+8) and columns 2(l%4) (+8), as the mma.m16n8k16 accumulator layout; column-major:
//   eight 4-byte accesses;
// - to or from global memory: the same accesses, counted as global ones.
void wmma_move(bool store, const void* p, unsigned ldm, int eb, bool col_major) {
  if (!g_on) return;
  ++g_c[store ? kWmmaStore : kWmmaLoad];
  const auto* base = static_cast<const std::uint8_t*>(p);
  const model::SharedWindow& win = shared_window();
  const bool shared = base >= win.base && base < win.base + win.size;
  auto at = [&](int mem_row, int elem) { return base + (std::size_t(mem_row) * ldm + elem) * eb; };
  if (eb == 2 && !store && shared) {
    std::uint32_t addrs[32];
    for (int ph = 0; ph < 4; ++ph)
      for (int r = 0; r < 8; ++r)
        addrs[ph * 8 + r] =
            static_cast<std::uint32_t>(at((ph % 2) * 8 + r, (ph / 2) * 8) - win.base);
    ldmatrix(4, addrs);
    return;
  }
  // Element-wise moves: instruction i moves, for lane l, element (row, col) of the tile.
  const int per_lane = 8;
  const int width = (eb == 4 && !col_major) ? 8 : eb;  // adjacent fp32 pairs move as 8 bytes
  const int instrs = per_lane * eb / width;
  for (int i = 0; i < instrs; ++i) {
    Group g;
    g.kind = shared ? (store ? Kind::sh_st : Kind::sh_ld) : (store ? Kind::gl_st : Kind::gl_ld);
    g.mask = 0xffffffffu;
    for (int l = 0; l < 32; ++l) {
      int row, col;
      if (width == 8) {  // i: (row half, column half)
        row = l / 4 + 8 * (i % 2);
        col = 2 * (l % 4) + 8 * (i / 2);
      } else {  // one element per instruction, in the same layout
        row = l / 4 + 8 * ((i / 2) % 2);
        col = 2 * (l % 4) + (i % 2) + 8 * (i / 4);
      }
      const std::uint8_t* a = col_major ? at(col, row) : at(row, col);
      g.size[l] = static_cast<std::uint8_t>(width);
      g.src_size[l] = 0;
      g.saddr[l] = shared ? static_cast<std::uint32_t>(a - win.base) : 0;
      g.gaddr[l] = reinterpret_cast<std::uintptr_t>(a);
    }
    count_group(g);
  }
}

void wgmma(int n, bool a_from_shared) {
  if (!g_on) return;
  if (n >= 8 && n <= 256 && n % 8 == 0) ++g_c[kWgmma64 + n / 8 - 1];
  // B: N x 16 elements, A: 64 x 16 (2 bytes each).
  g_c[kWgmmaSmemBytes] += std::uint64_t(n) * 16 * 2 + (a_from_shared ? 64 * 16 * 2 : 0);
}

void cp_async(const void* site, std::uint32_t smem_addr, const void* src, std::size_t bytes,
              std::size_t src_bytes) {
  if (!g_on) return;
  event(site, Kind::cp_async, [&](Group& g, int l) {
    g.size[l] = static_cast<std::uint8_t>(bytes);
    g.src_size[l] = static_cast<std::uint8_t>(src_bytes);
    g.saddr[l] = smem_addr;
    g.gaddr[l] = reinterpret_cast<std::uintptr_t>(src);
  });
}

void sync(const void* site, Sync kind) {
  if (!g_on) return;
  event(site, Kind::sync, [&](Group& g, int) { g.sync = static_cast<std::uint8_t>(kind); });
}

void tma(bool store, std::uint32_t bytes) {
  if (!g_on) return;
  ++g_c[store ? kTmaStore : kTmaLoad];
  g_c[store ? kTmaStoreBytes : kTmaLoadBytes] += bytes;
}

void access(const void* site, const void* addr, std::size_t size, bool store, bool atomic) {
  if (!g_on || size == 0) return;
  const model::SharedWindow& win = shared_window();
  const auto* p = static_cast<const std::uint8_t*>(addr);
  const bool window = p >= win.base && p < win.base + win.size;
  if (atomic) {  // one instruction each, never merged with its neighbours
    const bool shared = window || in(static_shared(), addr);
    if (!shared && !in(g_allocations, addr)) return;
    event(site, shared ? Kind::sh_atom : Kind::gl_atom, [&](Group& g, int l) {
      g.size[l] = static_cast<std::uint8_t>(size);
      g.gaddr[l] = reinterpret_cast<std::uintptr_t>(addr);
    });
    return;
  }
  if (window || in(static_shared(), addr)) {
    const auto a = window ? static_cast<std::uint32_t>(p - win.base)
                          : static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(p));
    hold_access(site, store ? Kind::sh_st : Kind::sh_ld, a, size);
  } else if (in(g_allocations, addr)) {
    hold_access(site, store ? Kind::gl_st : Kind::gl_ld, reinterpret_cast<std::uintptr_t>(addr),
                size);
  }
}

// ---------------------------------------------------------------------------------------------
namespace {

std::uint64_t sum(int from, int to) {
  std::uint64_t s = 0;
  for (int i = from; i <= to; ++i)
    s += g_c[static_cast<std::size_t>(i)];
  return s;
}

}  // namespace

void launch_end(bool ok) {
  if (!g_on) return;
  g_block.warps.clear();
  Launch& L = g_current;
  L.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
  const double scale =
      L.blocks_run == 0 ? 0.0 : static_cast<double>(L.blocks) / static_cast<double>(L.blocks_run);
  auto add = [&](std::string name, std::string metric, double raw, std::string meaning) {
    L.counts.push_back(Count{std::move(name), std::move(metric), raw * scale, std::move(meaning)});
  };
  auto u = [](std::uint64_t v) { return static_cast<double>(v); };
  std::uint64_t wgmma = 0;
  for (int i = kWgmma64; i < kWgmmaEnd; ++i)
    wgmma += g_c[static_cast<std::size_t>(i)];
  const std::uint64_t ldsm = g_c[kLdsm1] + g_c[kLdsm2] + g_c[kLdsm4];
  const std::uint64_t sh_ld = sum(kShLd1, kShLd16), sh_st = sum(kShSt1, kShSt16);
  const std::uint64_t gl_ld = sum(kGlLd1, kGlLd16), gl_st = sum(kGlSt1, kGlSt16);
  const std::uint64_t cp = sum(kCp4, kCp16);
  const std::uint64_t ld_conf =
      (g_c[kShLdWavefronts] - g_c[kShLdIdeal]) + (g_c[kLdsmWavefronts] - g_c[kLdsmIdeal]);
  const std::uint64_t st_conf = g_c[kShStWavefronts] - g_c[kShStIdeal];
  const std::uint64_t cp_conf = g_c[kCpWavefronts] - g_c[kCpIdeal];
  // Nsight Compute's shared wavefronts on the H100, as the committed profiles pin them down
  // (book chapter "What the emulator counts"): the LSU's LDS, STS, LDSM and LDGSTS wavefronts by
  // the bank rule, plus one per shuffle, one per 128 bytes wgmma reads from shared memory, and one
  // per warp. The last three are inferred from the profiles, not from NVIDIA's documentation.
  const std::uint64_t wgmma_wf = (g_c[kWgmmaSmemBytes] + 127) / 128;
  const std::uint64_t lsu_wf = g_c[kShLdWavefronts] + g_c[kShStWavefronts] + g_c[kLdsmWavefronts] +
                               g_c[kCpWavefronts] + g_c[kShfl] + wgmma_wf + g_c[kWarps];
  const std::uint64_t l1_sectors = g_c[kGlLdSectors] + g_c[kGlStSectors] + g_c[kCpSectors];

  // Tensor-core instructions, per warp (a wgmma is one instruction in each of its 4 warps).
  add("inst.tensor", "sm__inst_executed_pipe_tensor_op_hmma.sum",
      u(g_c[kMma] + 2 * g_c[kWmmaMma] + 4 * wgmma),
      "tensor-pipe warp instructions: mma.sync m16n8k16 + 2 per WMMA mma_sync + 4 per wgmma");
  add("inst.mma.m16n8k16", "", u(g_c[kMma]), "mma.sync.aligned.m16n8k16 (HMMA.16816)");
  add("inst.wmma.mma", "", u(g_c[kWmmaMma]), "wmma::mma_sync m16n16k16");
  add("inst.wmma.load", "", u(g_c[kWmmaLoad]), "wmma::load_matrix_sync");
  add("inst.wmma.store", "", u(g_c[kWmmaStore]), "wmma::store_matrix_sync");
  add("inst.wgmma", "sm__inst_executed_pipe_tensor_op_gmma.sum", u(4 * wgmma),
      "wgmma.mma_async, per warp (4 per warpgroup instruction)");
  for (int i = kWgmma64; i < kWgmmaEnd; ++i)
    if (g_c[static_cast<std::size_t>(i)])
      add("inst.wgmma.m64n" + std::to_string((i - kWgmma64 + 1) * 8) + "k16", "",
          u(g_c[static_cast<std::size_t>(i)]), "wgmma.mma_async by shape, per warpgroup");
  add("inst.ldmatrix", "smsp__inst_executed_op_ldsm.sum", u(ldsm),
      "ldmatrix (LDSM), incl. WMMA 16-bit loads from shared memory");
  add("inst.ldmatrix.x1", "", u(g_c[kLdsm1]), "ldmatrix .x1");
  add("inst.ldmatrix.x2", "", u(g_c[kLdsm2]), "ldmatrix .x2");
  add("inst.ldmatrix.x4", "", u(g_c[kLdsm4]), "ldmatrix .x4");
  add("inst.shared.ld", "sm__sass_inst_executed_op_shared_ld.sum", u(sh_ld),
      "ordinary shared loads (LDS), per warp");
  add("inst.shared.st", "sm__sass_inst_executed_op_shared_st.sum", u(sh_st),
      "ordinary shared stores (STS), per warp");
  for (int i = 0; i < 5; ++i) {
    if (g_c[kShLd1 + i])
      add(std::string("inst.shared.ld.") + kWidthNames[i], "", u(g_c[kShLd1 + i]),
          std::string("shared loads of ") + kWidthNames[i] + " bits per lane");
    if (g_c[kShSt1 + i])
      add(std::string("inst.shared.st.") + kWidthNames[i], "", u(g_c[kShSt1 + i]),
          std::string("shared stores of ") + kWidthNames[i] + " bits per lane");
  }
  add("inst.global.ld", "sm__sass_inst_executed_op_global_ld.sum", u(gl_ld),
      "ordinary global loads (LDG), per warp");
  add("inst.global.st", "sm__sass_inst_executed_op_global_st.sum", u(gl_st),
      "ordinary global stores (STG), per warp");
  for (int i = 0; i < 5; ++i) {
    if (g_c[kGlLd1 + i])
      add(std::string("inst.global.ld.") + kWidthNames[i], "", u(g_c[kGlLd1 + i]),
          std::string("global loads of ") + kWidthNames[i] + " bits per lane");
    if (g_c[kGlSt1 + i])
      add(std::string("inst.global.st.") + kWidthNames[i], "", u(g_c[kGlSt1 + i]),
          std::string("global stores of ") + kWidthNames[i] + " bits per lane");
  }
  // Atomics (atomicAdd): one warp instruction per site and occurrence, as the accesses above;
  // whether the GPU issues RED (result unused) or ATOM is the compiler's choice: counted together.
  if (g_c[kGlAtom]) {
    add("inst.global.atom", "", u(g_c[kGlAtom]),
        "atomics on global memory (RED or ATOM), per warp");
    add("global.atom.sectors", "", u(g_c[kGlAtomSectors]),
        "sectors the global atomics touch (not in global.bytes)");
  }
  if (g_c[kShAtom])
    add("inst.shared.atom", "", u(g_c[kShAtom]), "atomics on shared memory (ATOMS), per warp");
  add("inst.cp_async", "smsp__inst_executed_op_ldgsts.sum", u(cp), "cp.async (LDGSTS), per warp");
  for (int i = 0; i < 3; ++i)
    if (g_c[kCp4 + i])
      add("inst.cp_async." + std::to_string(4 << i) + "B", "", u(g_c[kCp4 + i]),
          "cp.async of " + std::to_string(4 << i) + " bytes per lane");
  add("inst.tma.load", "", u(g_c[kTmaLoad]), "TMA tile loads (cp.async.bulk.tensor, UTMALDG)");
  add("bytes.tma.load", "", u(g_c[kTmaLoadBytes]), "bytes the TMA loads bring into shared memory");
  add("inst.tma.store", "", u(g_c[kTmaStore]), "TMA tile stores (UTMASTG)");
  add("bytes.tma.store", "", u(g_c[kTmaStoreBytes]), "bytes the TMA stores write to global memory");
  add("inst.shfl", "", u(g_c[kShfl]), "shuffles (shfl.sync), per warp");
  add("inst.vote", "", u(g_c[kVote]), "votes, per warp");
  add("inst.syncwarp", "", u(g_c[kSyncwarp]), "__syncwarp, per warp");
  add("inst.bar.sync", "", u(g_c[kBarSync]), "__syncthreads (bar.sync 0), per warp");
  add("inst.bar.named", "", u(g_c[kBarNamedSync]), "named bar.sync with a count, per warp");
  add("inst.bar.arrive", "", u(g_c[kBarArrive]), "bar.arrive, per warp");
  add("inst.mbarrier.wait", "", u(g_c[kMbarWait]),
      "completed mbarrier waits (try_wait/test_wait), per warp");
  add("inst.mbarrier.arrive", "", u(g_c[kMbarArrive]), "mbarrier arrives, per warp");
  // Shared memory, LSU pipe.
  add("shared.wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", u(lsu_wf),
      "LDS + STS + LDSM + cp.async writes + 1 per shuffle + wgmma bytes / 128 + 1 per warp");
  add("shared.ld.wavefronts", "", u(g_c[kShLdWavefronts]), "LDS wavefronts");
  add("shared.st.wavefronts", "", u(g_c[kShStWavefronts]), "STS wavefronts");
  add("shared.ldsm.wavefronts", "", u(g_c[kLdsmWavefronts]), "LDSM wavefronts");
  add("shared.cp_async.wavefronts", "", u(g_c[kCpWavefronts]),
      "wavefronts of cp.async's shared writes");
  add("shared.ld.conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", u(ld_conf),
      "extra wavefronts of LDS and LDSM over one per phase");
  add("shared.st.conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", u(st_conf),
      "extra wavefronts of STS over one per phase");
  add("shared.cp_async.conflicts", "", u(cp_conf),
      "extra wavefronts of cp.async's shared writes over one per phase");
  add("shared.wgmma.bytes", "", u(g_c[kWgmmaSmemBytes]),
      "operand bytes wgmma reads from shared memory (async proxy; / 128 in shared.wavefronts)");
  add("warps", "", u(g_c[kWarps]), "warps run (1 wavefront each in shared.wavefronts)");
  // Global memory.
  add("global.bytes", "l1tex__t_bytes.sum", 32.0 * u(l1_sectors),
      "32-byte sectors requested by LDG, STG and cp.async, times 32");
  add("global.bytes+tma", "lts__t_bytes.sum",
      32.0 * u(l1_sectors) + u(g_c[kTmaLoadBytes] + g_c[kTmaStoreBytes]),
      "sector bytes requested by LDG, STG, cp.async, plus the TMA's bytes");
  add("global.ld.sectors", "", u(g_c[kGlLdSectors]), "sectors of LDG");
  add("global.st.sectors", "", u(g_c[kGlStSectors]), "sectors of STG");
  add("global.cp_async.sectors", "", u(g_c[kCpSectors]), "sectors cp.async reads");
  (void)ok;
  g_launches.push_back(std::move(L));
  g_current = Launch{};
}

void print(std::ostream& out) {
  int id = 0;
  for (const Launch& L : g_launches) {
    out << "profile  kernel " << id++ << ": " << L.kernel << "\n         grid (" << L.grid[0]
        << ", " << L.grid[1] << ", " << L.grid[2] << "), block (" << L.block[0] << ", "
        << L.block[1] << ", " << L.block[2] << "), " << L.dynamic_smem
        << " B dynamic shared memory; " << L.blocks_run << " of " << L.blocks << " blocks emulated";
    if (L.blocks_run != L.blocks)
      out << " (evenly spaced), every count scaled by " << std::setprecision(6)
          << static_cast<double>(L.blocks) / static_cast<double>(L.blocks_run);
    out << "; " << std::fixed << std::setprecision(2) << L.wall_seconds << " s wall\n";
    out.unsetf(std::ios::floatfield);
    for (const Count& c : L.counts) {
      if (c.value == 0 && c.ncu_metric.empty()) continue;
      std::ostringstream v;
      v << std::fixed
        << std::setprecision(
               c.value == static_cast<double>(static_cast<std::uint64_t>(c.value)) ? 0 : 1)
        << c.value;
      out << "         " << std::left << std::setw(28) << c.name << std::right << std::setw(16)
          << v.str() << "  " << (c.ncu_metric.empty() ? c.meaning : c.ncu_metric) << '\n';
    }
  }
}

void write_ncu_csv(std::ostream& out, const std::string& process_name) {
  out << "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\","
         "\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\","
         "\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
  int id = 0;
  for (const Launch& L : g_launches) {
    std::string kernel = L.kernel;
    std::replace(kernel.begin(), kernel.end(), '"', '\'');
    for (const Count& c : L.counts) {
      if (c.ncu_metric.empty()) continue;
      std::ostringstream v;
      v << std::fixed << std::setprecision(0) << c.value;
      out << '"' << id << "\",\"0\",\"" << process_name << "\",\"fsemu\",\"" << kernel
          << "\",\"1\",\"0\",\"(" << L.block[0] << ", " << L.block[1] << ", " << L.block[2]
          << ")\",\"(" << L.grid[0] << ", " << L.grid[1] << ", " << L.grid[2]
          << ")\",\"0\",\"9.0\",\"fsemu emulated counts\",\"" << c.ncu_metric << "\",\""
          << (c.ncu_metric.find("bytes") != std::string::npos ? "byte" : "") << "\",\"" << v.str()
          << "\"\n";
    }
    ++id;
  }
}

}  // namespace fsemu::profile
