// emu/src/global_races.cpp — races between the blocks of one launch on global memory
// (global_races.hpp).
#include "global_races.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fsemu/access.hpp"
#include "fsemu/events.hpp"
#include "fsemu/model/fault.hpp"
#include "fsemu/scheduler.hpp"

namespace fsemu::global_races {
namespace {

constexpr std::uintptr_t kGrain = 2;  // bytes per cell: an fp16 or bf16 element

// What a launch did to 2 bytes so far. While one block alone has touched them: that block and the
// kinds of access it made. Once several have, they all made the one kind that does not conflict
// with itself (reads, or atomics) and kMany is set. `site` is where the first write or atomic
// update was made (the first read where there is none).
enum : std::uint8_t { kRead = 1, kWrite = 2, kAtomic = 4, kMany = 8 };
struct Cell {
  std::uint32_t block;  // linear block id (the first block, when kMany)
  std::uint16_t site;   // index of a code address in g_sites (0: not kept)
  std::uint8_t epoch;   // the launch (mod 256; 0: none yet)
  std::uint8_t state;   // kRead | kWrite | kAtomic | kMany
};

static_assert(sizeof(Cell) == 8, "a Cell's all-zero bytes are Cell{}");

// The cells of an allocation: one per kGrain bytes, four times the allocation's size. An anonymous
// mapping, whose pages the kernel supplies (zero: Cell{}) only when a cell on them is first
// written, so that a launch that writes a few rows of a large buffer (the profiler's sample of
// blocks, --profile-blocks, into the unfused stages' score matrices) costs the pages it touches,
// not a zero-filled copy of the whole buffer four times over.
class Cells {
 public:
  Cells() = default;
  Cells(const Cells&) = delete;
  Cells& operator=(const Cells&) = delete;
  ~Cells() {
    if (cells_) munmap(cells_, bytes());
  }
  bool empty() const { return cells_ == nullptr; }
  std::size_t size() const { return count_; }
  Cell& operator[](std::size_t i) { return cells_[i]; }
  void make(std::size_t count) {
    count_ = count;
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "fsemu: cannot map %zu bytes for the check of races between blocks\n",
                   bytes());
      std::abort();
    }
    cells_ = static_cast<Cell*>(p);
  }
  // Every cell back to Cell{}: the pages are given back, and come back zero when touched.
  void clear() {
    if (cells_ && madvise(cells_, bytes(), MADV_DONTNEED) != 0) {
      std::fill(cells_, cells_ + count_, Cell{});
    }
  }

 private:
  std::size_t bytes() const { return count_ * sizeof(Cell); }
  Cell* cells_ = nullptr;
  std::size_t count_ = 0;
};

struct Allocation {
  std::uintptr_t begin, end;
  Cells cells;               // made at the first write
  std::uint8_t written = 0;  // the launch (epoch) that first wrote it, plainly or atomically
};

std::vector<std::unique_ptr<Allocation>> g_allocations;  // by begin
Allocation* g_recent[4] = {};                            // the last ones accesses hit, newest first
std::uint8_t g_epoch = 0;
unsigned g_grid[3] = {1, 1, 1};
std::uint32_t g_block = 0;  // the running block's linear id
bool g_in_block = false;
// Fast rejections: the running block's shared-memory window, and the span of all allocations.
std::uintptr_t g_window = 0, g_window_bytes = 0;
std::uintptr_t g_lowest = 0, g_span = 0;
int g_observer = -1;
bool g_reported = false;  // the launch's first race is reported; the rest are not looked at
std::vector<const void*> g_sites;
std::unordered_map<const void*, std::uint16_t> g_site_index;

// The last site looked up (a kernel's loop makes its accesses at a few sites, one after another):
// valid while g_sites holds it (launch_begin clears both).
const void* g_last_pc = nullptr;
std::uint16_t g_last_site = 0;

std::uint16_t site(const void* pc) {
  if (pc == g_last_pc && g_last_site != 0) return g_last_site;
  const auto it = g_site_index.find(pc);
  std::uint16_t index = 0;
  if (it != g_site_index.end()) {
    index = it->second;
  } else {
    if (g_sites.size() > 0xffff) return 0;
    index = static_cast<std::uint16_t>(g_sites.size());
    g_sites.push_back(pc);
    g_site_index.emplace(pc, index);
  }
  g_last_pc = pc;
  g_last_site = index;
  return index;
}

Allocation* find(std::uintptr_t x) {
  for (int i = 0; i < 4; ++i) {
    Allocation* al = g_recent[i];
    if (al && x - al->begin < al->end - al->begin) {
      if (i > 0) std::rotate(g_recent, g_recent + i, g_recent + i + 1);
      return al;
    }
  }
  auto it = std::upper_bound(g_allocations.begin(), g_allocations.end(), x,
                             [](std::uintptr_t a, const auto& al) { return a < al->begin; });
  if (it == g_allocations.begin()) return nullptr;
  Allocation* al = (--it)->get();
  if (x >= al->end) return nullptr;
  std::rotate(g_recent, g_recent + 3, g_recent + 4);
  g_recent[0] = al;
  return al;
}

void stop_skipping();

// What on_access returns from at once, for the hooks to test without calling it
// (access::filter): everything while no block runs or once a race is reported; else the
// accesses outside the allocations' span or inside the block's shared-memory window.
void update_filter() {
  if (g_observer < 0) return;
  if (g_reported || !g_in_block)
    access::filter(g_observer, nullptr, 0, nullptr, 0);
  else
    access::filter(g_observer, reinterpret_cast<const void*>(g_lowest), g_span,
                   reinterpret_cast<const void*>(g_window), g_window_bytes);
}

void forget_recent() {
  stop_skipping();
  std::fill(g_recent, g_recent + 4, nullptr);
  g_lowest = g_allocations.empty() ? 0 : g_allocations.front()->begin;
  std::uintptr_t highest = g_lowest;
  for (const auto& al : g_allocations)
    highest = std::max(highest, al->end);
  g_span = highest - g_lowest;
  update_filter();
}

// What the observer skips the reads of (access::skip_reads): in each slot a run of allocations
// that this launch has not written, adjacent in address order, from the first one's start to the
// last one's end (between two allocations there is nothing on_access looks at), so that the reads
// of a kernel's inputs end in one slot. An allocation's first write, the launch's start and any
// allocation or free end the skip of the run that holds it.
std::uintptr_t g_skip_begin[access::kSkipSlots] = {}, g_skip_end[access::kSkipSlots] = {};
int g_next_slot = 0;
void stop_skipping() {
  g_next_slot = 0;  // the hooks test slot 0 first
  for (int i = 0; i < access::kSkipSlots; ++i) {
    g_skip_begin[i] = g_skip_end[i] = 0;
    if (g_observer >= 0) access::skip_reads(g_observer, i, nullptr, 0);
  }
}
void skip(const Allocation* al) {
  auto at = std::lower_bound(g_allocations.begin(), g_allocations.end(), al->begin,
                             [](const auto& x, std::uintptr_t b) { return x->begin < b; });
  auto first = at, last = at;
  while (first != g_allocations.begin() && (*(first - 1))->written != g_epoch)
    --first;
  while (last + 1 != g_allocations.end() && (*(last + 1))->written != g_epoch)
    ++last;
  const int i = g_next_slot;
  g_next_slot = (g_next_slot + 1) % access::kSkipSlots;
  g_skip_begin[i] = (*first)->begin;
  g_skip_end[i] = (*last)->end;
  access::skip_reads(g_observer, i, reinterpret_cast<const void*>(g_skip_begin[i]),
                     g_skip_end[i] - g_skip_begin[i]);
}
void unskip(const Allocation* al) {
  for (int i = 0; i < access::kSkipSlots; ++i)
    if (al->begin >= g_skip_begin[i] && al->begin < g_skip_end[i]) {
      g_skip_begin[i] = g_skip_end[i] = 0;
      access::skip_reads(g_observer, i, nullptr, 0);
    }
}

std::string hex(std::uint64_t v) {
  return "0x" + model::SharedWindow::hex(v);
}

std::string block_name(std::uint32_t id) {
  return "block (" + std::to_string(id % g_grid[0]) + ", " +
         std::to_string(id / g_grid[0] % g_grid[1]) + ", " +
         std::to_string(id / (g_grid[0] * g_grid[1])) + ")";
}

void report(const access::Access& a, const Allocation& al, std::size_t c, const Cell& cell,
            std::uint32_t me) {
  g_reported = true;
  update_filter();
  const std::uint8_t k = cell.state;
  const bool many = (k & kMany) != 0;
  const std::string mine = std::string(a.atomic  ? "an atomic update"
                                       : a.write ? "a store"
                                                 : "a load") +
                           " of " + std::to_string(a.size) + " bytes";
  const std::string others = cell.block == me ? std::string("other blocks")
                             : many           ? block_name(cell.block) + " and others"
                                              : block_name(cell.block);
  std::string verb;
  for (auto [bit, word] :
       {std::pair{kRead, "read"}, {kWrite, "wrote"}, {kAtomic, "updated atomically"}})
    if (k & bit) verb += (verb.empty() ? "" : " and ") + std::string(word);
  const std::uintptr_t byte =
      std::max(reinterpret_cast<std::uintptr_t>(a.addr), al.begin + c * kGrain);
  const char* hint =
      a.atomic || (k & kAtomic)
          ? " (an ordinary access is not atomic with respect to another block's atomic update of "
            "the same bytes: read the result in a later launch, or update it atomically too)"
          : " (a sum that several blocks add into needs atomic adds, atomicAdd: a plain "
            "read-modify-write loses the other blocks' updates)";
  const void* their_pc = cell.site < g_sites.size() ? g_sites[cell.site] : nullptr;
  report_fault("a race between blocks: " + mine + " at " + access::describe_pc(a.pc) + " " +
               (a.write ? "writes" : "reads") + " global memory " + hex(byte) + " (byte " +
               std::to_string(byte - al.begin) + " of a device allocation of " +
               std::to_string(al.end - al.begin) + " bytes) that " + others +
               " of the same launch " + verb + " (first at " +
               (their_pc ? access::describe_pc(their_pc) : std::string("an unrecorded site")) +
               "): the blocks of a launch are not ordered, so on the GPU the accesses race" + hint);
}

// The observer of the kernels' accesses (fsemu/access.hpp), attached while a launch runs. Called
// from hooks the compiler declares nothrow: a race is recorded (report_fault), not thrown.
//
// Until a launch first writes into an allocation (plainly or atomically), its reads are not
// recorded: the inputs (Q, K, V), which every block reads and none writes, cost a lookup and no
// record. So a read made before the allocation's first write in the launch is not checked against
// later writes of other blocks (a write after a read, in the order the blocks happened to run):
// emu/README.md, Limits.
void on_access(void*, const access::Access& a) {
  if (g_reported || !g_in_block) return;
  const auto x = reinterpret_cast<std::uintptr_t>(a.addr);
  if (x - g_window < g_window_bytes || x - g_lowest >= g_span) return;
  Allocation* al = find(x);
  if (!al) return;  // shared memory, the thread's stack, host memory
  const std::uint8_t kind = a.atomic ? kAtomic : a.write ? kWrite : kRead;
  if (al->written != g_epoch) {
    if (kind == kRead) {  // and so are the allocation's other reads until it is written
      skip(al);
      return;
    }
    unskip(al);
    al->written = g_epoch;
    if (al->cells.empty()) al->cells.make((al->end - al->begin + kGrain - 1) / kGrain);
  }
  const std::uint32_t me = g_block;
  const std::size_t first = (x - al->begin) / kGrain;
  const std::size_t last = std::min(
      (x + std::max<std::uint32_t>(a.size, 1) - 1 - al->begin) / kGrain, al->cells.size() - 1);
  for (std::size_t c = first; c <= last; ++c) {
    Cell& cell = al->cells[c];
    if (cell.epoch != g_epoch) {  // first touched in this launch
      cell = Cell{me, site(a.pc), g_epoch, kind};
      continue;
    }
    if (cell.block == me && !(cell.state & kMany)) {  // this block's alone so far: ordered by its
      if (kind != kRead && !(cell.state & (kWrite | kAtomic)))  // own synchronisation (the
        cell.site = site(a.pc);                                 // sanitizer builds' concern)
      cell.state |= kind;
      continue;
    }
    // Other blocks touched them: only reads with reads and atomics with atomics go together.
    if ((kind == kRead && !(cell.state & (kWrite | kAtomic))) ||
        (kind == kAtomic && !(cell.state & (kRead | kWrite)))) {
      cell.state |= kMany;
      continue;
    }
    report(a, *al, c, cell, me);
    return;
  }
}

// The running block, from the scheduler's events (fsemu/events.hpp).
class Blocks final : public events::Observer {
 public:
  void block_begin(const events::Block& b) override {
    g_block = b.idx.x + g_grid[0] * (b.idx.y + g_grid[1] * b.idx.z);
    g_in_block = true;
    const model::SharedWindow& w = shared_window();  // its largest extent, set before the block
    g_window = reinterpret_cast<std::uintptr_t>(w.base);
    g_window_bytes = w.size;
    update_filter();
  }
  void block_end() override {
    g_in_block = false;
    update_filter();
  }
  void block_park(const events::Block&) override {
    g_in_block = false;
    update_filter();
  }
  void block_resume(const events::Block& b) override { block_begin(b); }
};
Blocks g_blocks;

}  // namespace

void note_atomic(void* p, std::size_t bytes, const void* pc) {
  if (g_observer < 0) return;  // no launch is being checked
  on_access(nullptr, access::Access{p, static_cast<std::uint32_t>(bytes), true, true, pc});
}

void note_allocation(const void* p, std::size_t bytes) {
  if (!p) return;
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  auto al = std::make_unique<Allocation>();
  al->begin = b;
  al->end = b + std::max<std::size_t>(bytes, 1);
  const auto at = std::upper_bound(g_allocations.begin(), g_allocations.end(), b,
                                   [](std::uintptr_t a, const auto& x) { return a < x->begin; });
  g_allocations.insert(at, std::move(al));
  forget_recent();
}

void note_free(const void* p) {
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  g_allocations.erase(std::remove_if(g_allocations.begin(), g_allocations.end(),
                                     [b](const auto& al) { return al->begin == b; }),
                      g_allocations.end());
  forget_recent();
}

void launch_begin(unsigned gx, unsigned gy, unsigned gz) {
  if (++g_epoch == 0) {  // 256 launches: the old records could pass for this launch's
    for (auto& al : g_allocations)
      al->cells.clear();
    g_epoch = 1;
  }
  g_grid[0] = gx;
  g_grid[1] = gy;
  g_grid[2] = gz;
  g_reported = false;
  stop_skipping();
  g_sites.assign(1, nullptr);
  g_site_index.clear();
  g_last_pc = nullptr;
  g_last_site = 0;
  static const bool subscribed = (events::subscribe(&g_blocks), true);  // for the program
  (void)subscribed;
  if (g_observer < 0) g_observer = access::attach(on_access, nullptr);
  update_filter();
}

void launch_end() {
  if (g_observer >= 0) access::detach(g_observer);
  g_observer = -1;
}

}  // namespace fsemu::global_races
