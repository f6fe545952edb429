// emu/src/scheduler.cpp — blocks, thread fibers, the scheduler, barriers and collectives
// (fsemu/scheduler.hpp).
#include "fsemu/scheduler.hpp"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <algorithm>
#include <bitset>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "device_limits.hpp"
#include "fsemu/access.hpp"
#include "fsemu/events.hpp"
#include "fsemu/progress.hpp"
#include "fsemu/seed.hpp"
#include "fsemu/sync.hpp"
#include "sanitize.hpp"
#if defined(FSEMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace fsemu {
namespace {

namespace bctx = boost::context;

// Thrown inside a thread's fiber to unwind it once the launch has failed (fault()).
struct LaunchAborted {};

struct Thread;

// What the scheduler's scan (step_block) tests first, one per position of the drawn order, kept
// together so that the scan reads them in sequence instead of each Thread: the thread is passed
// over while *watch == value -- it has exited (watch at kZero, value 0) or waits until the word
// changes (wait_for_change) -- and looked at otherwise (watch at kZero, value 1: it can run or
// waits on a predicate).
const std::uint64_t kZero = 0;
struct Slot {
  const std::uint64_t* watch = &kZero;
  std::uint64_t value = 1;
  Thread* thread = nullptr;
  void runnable() {
    watch = &kZero;
    value = 1;
  }
  void exited() {
    watch = &kZero;
    value = 0;
  }
};

struct Thread {
  ThreadInfo info;
  Slot* slot = nullptr;   // its position's in the block's drawn order
  bctx::fiber fiber;      // the thread, while suspended
  bctx::fiber scheduler;  // the scheduler, while the thread runs
  bool done = false;
  bool waiting = false;
  std::function<bool()> ready;           // the wait's condition, or empty when it watches a word:
  const std::uint64_t* watch = nullptr;  // it waits until *watch != watch_value (a generation)
  std::uint64_t watch_value = 0;
  std::function<std::string()> what;
  // What it waits on, when it waits for a word (wait_for_change: a plain function, which costs a
  // wait less than a std::function); `what` above when null.
  std::string (*what_word)(const void*) = nullptr;
  const void* what_context = nullptr;
  // Polls (fsemu/sync.hpp): the words the thread loaded atomically and what it found, the latest
  // last; while `polling`, it waits until poll_wait's word differs from the value recorded.
  struct Polled {
    const void* addr;
    std::uint32_t size;
    std::uint64_t value;
    const void* pc;
  };
  std::vector<Polled> polled;
  Polled poll_wait{};
  bool polling = false;
  bool yielding = false;        // it released a word a parked block polls: its block steps aside
  bctx::stack_context stack{};  // its fiber's stack (the sanitizer builds announce switches to it)
#if defined(FSEMU_ASAN)
  void* fake_stack = nullptr;  // ASan's fake stack of the thread while it is switched out
#endif
#if defined(FSEMU_TSAN)
  void* tsan_fiber = nullptr;  // named after the CUDA thread, for the race reports
  bool started = false;
  int ignore_depth = 0;  // sanitize::IgnoreAccesses scopes open in the thread
#endif
};

struct NamedBarrier {
  int id = 0;
  const char* what = "";  // the operation its waiters are in (for a deadlock report)
  int expected = 0;       // threads, 0 while no one has arrived
  int arrived = 0;
  std::uint64_t generation = 0;
  char sync[4] = {};  // TSan: happens-before through sync[generation % 4] (sanitize.hpp)
};

struct Collective {
  bool warp = true;  // a warp's (or a warpgroup's)
  const char* what = nullptr;
  std::uint32_t mask = 0;
  std::bitset<128> arrived;
  void* args[128] = {};
  std::uint64_t generation = 0;
  int joined = 0;     // arrived.count()
  int need = 0;       // the participants it waits for (the mask's lanes, or 128)
  int first = -1;     // the participant that opened it (for a divergence report)
  char sync[2] = {};  // TSan: happens-before through sync[generation % 2] (sanitize.hpp)
};

struct Block {
  LaunchConfig config;
  uint3 idx{};
  std::vector<std::unique_ptr<Thread>> threads;
  Thread* current = nullptr;
  int exited = 0;
  NamedBarrier bars[16];
  std::vector<Collective> warps, warpgroups;
  std::vector<std::uint8_t> window_storage;
  model::SharedWindow window;
  std::string failure;                              // set by the first fault
  std::size_t dynamic_offset = kDynamicSmemOffset;  // where the dynamic shared memory starts
  char exit_sync = 0;  // TSan: every thread's exit happens before the block's end
#if defined(FSEMU_TSAN)
  // The stacks of its exited threads, back to the pool only when the block ends (PooledStack).
  std::vector<bctx::stack_context> retired_stacks;
#endif
  // Where its scheduling stands (run_block), kept while the block is parked.
  std::uint64_t linear = 0;  // its linear index in the grid
  std::size_t slot = 0;      // which of the launch's Block objects it is (TSan fibers)
  std::vector<int> order;    // the threads in the drawn warp order
  std::vector<Slot> slots;   // their Slots, in the same order
  std::vector<std::size_t> segment;
  std::size_t from = 0;
  int live = 0;
  bool yielded = false;  // parked by a release (yield_after_release), not by its polls
};

Block* g_block = nullptr;
// How many times a word that threads wait on (wait_for_change: a barrier's or a collective's
// generation) has changed: step_block's scan skips the positions it has just passed over by their
// Slots only while this has not moved.
std::uint64_t g_word_changes = 0;
void advance(std::uint64_t& generation) {
  ++generation;
  ++g_word_changes;
}
std::vector<Block*>* g_parked = nullptr;  // the launch's parked blocks (run_grid)
std::mt19937_64* g_rng = nullptr;         // the launch's draws (run_grid)

// Stacks are reused across blocks and launches (mapping 384 fresh guarded stacks per block
// would dominate small blocks). Each has a guard page, so an overflow faults instead of
// overwriting a neighbour.
constexpr std::size_t kStackBytes = 512 * 1024;
class StackPool {
 public:
  bctx::stack_context allocate() {
    if (!free_.empty()) {
      bctx::stack_context s = free_.back();
      free_.pop_back();
      return s;
    }
    return alloc_.allocate();
  }
  void deallocate(bctx::stack_context& s) noexcept { free_.push_back(s); }

 private:
  bctx::protected_fixedsize_stack alloc_{kStackBytes};
  std::vector<bctx::stack_context> free_;
};
StackPool& stack_pool() {
  static StackPool pool;
  return pool;
}
struct PooledStack {
  Thread* thread;
  [[maybe_unused]] Block* block;
  bctx::stack_context allocate() { return thread->stack = stack_pool().allocate(); }
  void deallocate(bctx::stack_context& s) noexcept {
#if defined(FSEMU_ASAN)
    // Frames a thread left behind (unwound by an exception) must not poison the next thread.
    __asan_unpoison_memory_region(static_cast<char*>(s.sp) - s.size, s.size);
#endif
#if defined(FSEMU_TSAN)
    // A thread's stack is freed when it exits, but the scheduler is ordered after its accesses
    // (exit_sync) only when its block ends. A block that starts while this one is parked would
    // take the stack, and TSan would see its frames race with the exited thread's; ordering the
    // scheduler after each exit instead would order the block's threads that have not yet
    // started after those that have (their first switch syncs with the scheduler), hiding races.
    block->retired_stacks.push_back(s);
#else
    stack_pool().deallocate(s);
#endif
  }
};

// Every switch between the scheduler and a thread's fiber is announced to the sanitizers of a
// sanitizer build (sanitize.hpp): to ASan the stack it is switching to (or it would take the
// fiber's frames for the scheduler's), to TSan the fiber it is switching to. The switches do not
// order the threads' accesses (TSan's no_sync): only the emulator's synchronisation does, so that
// two accesses that no barrier orders are a race even though one thread ran after the other.
// The first switch into a thread orders it after the launch's start (its inputs, the poisoned
// window, the blocks before it).
#if defined(FSEMU_ASAN)
const void* g_scheduler_stack = nullptr;
std::size_t g_scheduler_stack_size = 0;
void* g_scheduler_fake_stack = nullptr;
#endif
#if defined(FSEMU_TSAN)
void* g_scheduler_fiber = nullptr;
int g_scheduler_ignore_depth = 0;
#endif

// The scheduler, about to resume `t`, and back from it.
void switching_to_thread([[maybe_unused]] Thread& t) {
#if defined(FSEMU_ASAN)
  __sanitizer_start_switch_fiber(&g_scheduler_fake_stack,
                                 static_cast<char*>(t.stack.sp) - t.stack.size, t.stack.size);
#endif
#if defined(FSEMU_TSAN)
  __tsan_switch_to_fiber(t.tsan_fiber, t.started ? __tsan_switch_to_fiber_no_sync : 0);
  t.started = true;
#endif
}
void back_in_scheduler() {
#if defined(FSEMU_ASAN)
  __sanitizer_finish_switch_fiber(g_scheduler_fake_stack, nullptr, nullptr);
#endif
}
// A thread, about to switch to the scheduler (for good if `exiting`), and back from it.
void switching_to_scheduler([[maybe_unused]] Thread& t, [[maybe_unused]] bool exiting) {
#if defined(FSEMU_ASAN)
  __sanitizer_start_switch_fiber(exiting ? nullptr : &t.fake_stack, g_scheduler_stack,
                                 g_scheduler_stack_size);
#endif
#if defined(FSEMU_TSAN)
  __tsan_switch_to_fiber(g_scheduler_fiber, __tsan_switch_to_fiber_no_sync);
#endif
}
void back_in_thread([[maybe_unused]] Thread& t, [[maybe_unused]] bool first) {
#if defined(FSEMU_ASAN)
  if (first)  // learns the scheduler's stack, to switch back to it
    __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_stack, &g_scheduler_stack_size);
  else
    __sanitizer_finish_switch_fiber(t.fake_stack, nullptr, nullptr);
#endif
}

// ASan: of the window's storage only the block's dynamic shared memory is addressable, so an
// access before or past it is reported where it happens (a static __shared__ array is a global
// variable: ASan guards it by itself).
void poison_window([[maybe_unused]] Block& b) {
#if defined(FSEMU_ASAN)
  __asan_poison_memory_region(b.window_storage.data(), b.window_storage.size());
  __asan_unpoison_memory_region(b.window.base + b.dynamic_offset, b.config.dynamic_smem);
#endif
}
void unpoison_window([[maybe_unused]] Block& b) {
#if defined(FSEMU_ASAN)
  __asan_unpoison_memory_region(b.window_storage.data(), b.window_storage.size());
#endif
}

Block& block() {
  if (!g_block) {
    std::fprintf(stderr, "fsemu: a device function was called outside a kernel launch\n");
    std::abort();
  }
  return *g_block;
}
Thread& current() {
  Block& b = block();
  if (!b.current) {
    std::fprintf(stderr, "fsemu: a device function was called outside a thread\n");
    std::abort();
  }
  return *b.current;
}

std::string where(const Thread& t) {
  std::ostringstream s;
  s << "block (" << t.info.block_idx.x << ", " << t.info.block_idx.y << ", " << t.info.block_idx.z
    << "), thread (" << t.info.thread_idx.x << ", " << t.info.thread_idx.y << ", "
    << t.info.thread_idx.z << ") = warp " << t.info.warp << " lane " << t.info.lane;
  return s.str();
}

// Switches from the running thread back to the scheduler; returns when it is resumed.
void suspend() {
  Thread& t = current();
  switching_to_scheduler(t, false);
  t.scheduler = std::move(t.scheduler).resume();
  back_in_thread(t, false);
  if (!block().failure.empty()) throw LaunchAborted{};
}

bool barrier_complete(const Block& b, const NamedBarrier& bar, bool all_threads) {
  const int n = static_cast<int>(b.threads.size());
  return all_threads ? bar.arrived + b.exited >= n : bar.arrived >= bar.expected;
}

}  // namespace

const ThreadInfo& self() {
  return current().info;
}
bool in_thread() {
  return g_block && g_block->current;
}

model::SharedWindow& shared_window() {
  return block().window;
}
void* dynamic_shared_memory(std::size_t declared_alignment) {
  Block& b = block();
  const std::size_t offset = std::max<std::size_t>(kDynamicSmemOffset, declared_alignment);
  if (offset > kMaxDynamicSmemOffset || (offset & (offset - 1)) != 0)
    fault("dynamic shared memory declared with alignment " + std::to_string(declared_alignment) +
          " (the emulator places it at most 1024-aligned)");
  // The window ends where the launch's dynamic shared memory ends: an access past it faults.
  b.window.size = static_cast<std::uint32_t>(offset + b.config.dynamic_smem);
  if (offset != b.dynamic_offset) {
    b.dynamic_offset = offset;
    poison_window(b);
  }
  return b.window.base + offset;
}
std::uint32_t shared_address(const void* generic, const char* what) {
  const model::SharedWindow& w = block().window;
  const auto* p = static_cast<const std::uint8_t*>(generic);
  if (p < w.base || p >= w.base + w.size)
    fault(std::string(what) + ": the pointer " +
          model::SharedWindow::hex(reinterpret_cast<std::uintptr_t>(p)) +
          " is not into the block's shared memory");
  return static_cast<std::uint32_t>(p - w.base);
}
void* shared_pointer(std::uint32_t addr) {
  model::SharedWindow& w = block().window;
  w.check(addr, 1, "shared address");
  return w.base + addr;
}

void wait_until(const std::function<bool()>& ready, const std::function<std::string()>& what) {
  if (ready()) return;
  Thread& t = current();
  t.waiting = true;
  t.ready = ready;
  t.what = what;
  t.what_word = nullptr;
  suspend();
}

namespace {
// The scheduler's own look at a polled word (4 or 8 bytes, naturally aligned: device.cpp's
// check_word), not an access of the thread that polls: plain atomic loads, which ThreadSanitizer
// does not see in this uninstrumented file, where memcpy would reach its interceptor (a race
// between the blocks whose threads poll the word, on the scheduler's stack).
std::uint64_t word_at(const void* p, std::uint32_t size) {
  if (size == 4) return __atomic_load_n(static_cast<const std::uint32_t*>(p), __ATOMIC_RELAXED);
  return __atomic_load_n(static_cast<const std::uint64_t*>(p), __ATOMIC_RELAXED);
}
std::string poll_what(const Thread::Polled& p) {
  std::ostringstream s;
  s << "polls the " << p.size << " bytes at 0x" << std::hex
    << reinterpret_cast<std::uintptr_t>(p.addr) << std::dec << " (at " << access::describe_pc(p.pc)
    << "), which hold " << p.value << " and have not changed since its last load of them";
  return s.str();
}
}  // namespace

bool poll_unchanged(const void* p, std::uint32_t size, std::uint64_t value, const void* pc) {
  Thread& t = current();
  constexpr std::size_t kPolled = 4;  // words remembered per thread
  for (Thread::Polled& e : t.polled) {
    if (e.addr != p || e.size != size) continue;
    e.pc = pc;
    if (e.value != value) {
      e.value = value;
      return false;
    }
    // The same value again: the thread spins on the word. It waits until the word changes; its
    // block is parked when nothing else in it can run (run_block).
    t.poll_wait = e;
    t.polling = true;
    wait_until([&t] { return word_at(t.poll_wait.addr, t.poll_wait.size) != t.poll_wait.value; },
               [&t] { return poll_what(t.poll_wait); });
    t.polling = false;
    return true;
  }
  if (t.polled.size() == kPolled) t.polled.erase(t.polled.begin());
  t.polled.push_back(Thread::Polled{p, size, value, pc});
  return false;
}

namespace {
// Suspends the calling thread until *word changes from `value`: the scheduler checks the word
// itself, without calling a predicate (barriers and collectives, the most frequent waits).
void wait_for_change(const std::uint64_t* word, std::uint64_t value,
                     std::string (*what)(const void*), const void* context) {
  if (*word != value) return;
  Thread& t = current();
  t.waiting = true;
  t.ready = nullptr;
  t.watch = word;
  t.watch_value = value;
  t.slot->watch = word;
  t.slot->value = value;
  t.what_word = what;
  t.what_context = context;
  suspend();
}
}  // namespace

void report_fault(const std::string& message) {
  Block& b = block();
  if (b.failure.empty()) {
    b.failure = b.current ? where(*b.current) + ": " + message : message;
  }
}
void fault(const std::string& message) {
  report_fault(message);
  throw LaunchAborted{};
}

void bar_sync(int id, int count, const char* what) {
  Block& b = block();
  if (id < 0 || id > 15)
    fault(std::string(what) + ": barrier id " + std::to_string(id) + " is not in 0..15");
  const bool all = count <= 0;
  const int n = static_cast<int>(b.threads.size());
  if (!all && (count % 32 != 0 || count > n))
    fault(std::string(what) + ": thread count " + std::to_string(count) +
          " is not a multiple of 32 no larger than the block (" + std::to_string(n) + ")");
  const int expected = all ? n : count;
  events::barrier(events::Barrier{__builtin_return_address(0), id, expected, all, false});
  NamedBarrier& bar = b.bars[id];
  if (bar.arrived > 0 && bar.expected != expected)
    fault(std::string(what) + ": barrier " + std::to_string(id) + " used with " +
          std::to_string(expected) + " threads while " + std::to_string(bar.arrived) +
          " threads wait on it with " + std::to_string(bar.expected));
  bar.expected = expected;
  ++bar.arrived;
  const std::uint64_t gen = bar.generation;
  char* const sync = &bar.sync[gen % 4];
  sanitize::release(sync);  // what each thread did before the barrier happens before the
  if (barrier_complete(b, bar, all)) {  // accesses after it of every thread that waits on it
    bar.arrived = 0;
    advance(bar.generation);
    sanitize::acquire(sync);
    if (all) events::block_converged();
    return;
  }
  // (Barrier 0 completes also when its last missing threads exit: see the thread's exit.)
  bar.id = id;
  bar.what = what;
  wait_for_change(
      &bar.generation, gen,
      [](const void* p) {
        const auto& bar = *static_cast<const NamedBarrier*>(p);
        return std::string(bar.what) + " (barrier " + std::to_string(bar.id) + ": " +
               std::to_string(bar.arrived) + " of " + std::to_string(bar.expected) +
               " threads arrived)";
      },
      &bar);
  sanitize::acquire(sync);
}

void bar_arrive(int id, int count, const char* what) {
  Block& b = block();
  if (id < 1 || id > 15 || count <= 0 || count % 32 != 0)
    fault(std::string(what) +
          ": bar.arrive needs a barrier id in 1..15 and a thread count that is a "
          "multiple of 32 (got id " +
          std::to_string(id) + ", count " + std::to_string(count) + ")");
  events::barrier(events::Barrier{__builtin_return_address(0), id, count, false, true});
  NamedBarrier& bar = b.bars[id];
  if (bar.arrived > 0 && bar.expected != count)
    fault(std::string(what) + ": barrier " + std::to_string(id) + " used with " +
          std::to_string(count) + " threads while others use it with " +
          std::to_string(bar.expected));
  bar.expected = count;
  sanitize::release(&bar.sync[bar.generation % 4]);
  if (++bar.arrived >= bar.expected) {
    bar.arrived = 0;
    advance(bar.generation);
  }
}

void collective(Scope scope, std::uint32_t mask, const char* what, void* my_args,
                const std::function<void(void* const* args)>& fn) {
  Block& b = block();
  Thread& t = current();
  const bool warp = scope == Scope::warp;
  const int group = warp ? t.info.warp : t.info.warp / 4;
  const int idx = warp ? t.info.lane : t.info.linear % 128;
  std::vector<Collective>& groups = warp ? b.warps : b.warpgroups;
  if (!warp && b.threads.size() % 128 != 0)
    fault(std::string(what) + ": a warpgroup operation in a block of " +
          std::to_string(b.threads.size()) + " threads (not a multiple of 128)");
  if (warp && !(mask >> idx & 1u))
    fault(std::string(what) + ": the member mask 0x" + model::SharedWindow::hex(mask) +
          " does not include the calling lane " + std::to_string(idx));
  Collective& c = groups[static_cast<std::size_t>(group)];
  if (c.joined > 0 && ((c.what != what && std::strcmp(c.what, what) != 0) || c.mask != mask))
    fault(std::string(what) + " (mask 0x" + model::SharedWindow::hex(mask) + ") while " +
          (warp ? "lane " : "thread ") + std::to_string(c.first) + " of the same " +
          (warp ? "warp" : "warpgroup") + " waits in " + c.what + " (mask 0x" +
          model::SharedWindow::hex(c.mask) + "): the participants diverged");
  if (c.arrived[static_cast<std::size_t>(idx)])
    fault(std::string(what) + ": joined twice by the same participant");
  if (c.joined == 0) {
    c.what = what;
    c.mask = mask;
    c.first = idx;
    c.need = warp ? __builtin_popcount(mask) : 128;
  }
  c.arrived.set(static_cast<std::size_t>(idx));
  ++c.joined;
  c.args[idx] = my_args;
  // Every participant's accesses before the operation happen before the last one computes it,
  // and that computation (which writes every participant's results) before what each does next.
  const std::uint64_t gen = c.generation;
  char* const sync = &c.sync[gen % 2];
  sanitize::release(sync);
  if (c.joined == c.need) {
    sanitize::acquire(sync);
    if (warp) {
      fn(c.args);  // WMMA's loads and stores are the warp's accesses
      if (mask == 0xffffffffu) events::warp_converged(group);
    } else {  // wgmma (which marks its operand reads itself: async.cpp) and setmaxnreg
      const sanitize::IgnoreAccesses bookkeeping;
      fn(c.args);
    }
    sanitize::release(sync);
    c.arrived.reset();
    c.joined = 0;
    std::fill(std::begin(c.args), std::end(c.args), nullptr);
    c.what = nullptr;
    advance(c.generation);
    return;
  }
  c.warp = warp;
  wait_for_change(
      &c.generation, gen,
      [](const void* p) {
        const auto& c = *static_cast<const Collective*>(p);
        return std::string(c.what) + " (" + std::to_string(c.arrived.count()) + " of the " +
               (c.warp ? "warp's lanes in the mask" : "warpgroup's 128 threads") + " have arrived)";
      },
      &c);
  sanitize::acquire(sync);
}

namespace {
std::uint64_t& seed_value() {
  static std::uint64_t seed = [] {
    const char* s = std::getenv("FSEMU_SEED");
    return s ? std::strtoull(s, nullptr, 0) : 0x5eedULL;
  }();
  return seed;
}
}  // namespace
std::uint64_t schedule_seed() {
  return seed_value();
}
void set_schedule_seed(std::uint64_t seed) {
  seed_value() = seed;
}

namespace {

// What each thread of a block waits on, one line per group of threads with the same wait
// (consecutive thread ranges), each line starting with `indent` (for a deadlock report).
std::string thread_waits(const Block& b, const char* indent) {
  std::ostringstream s;
  std::string last;
  int from = -1, to = -1;
  auto flush = [&] {
    if (from >= 0) s << indent << "threads " << from << ".." << to << ": " << last;
  };
  const int n = static_cast<int>(b.threads.size());
  for (int i = 0; i < n; ++i) {
    const Thread& t = *b.threads[static_cast<std::size_t>(i)];
    const std::string w = t.done        ? std::string("exited")
                          : t.what_word ? t.what_word(t.what_context)
                                        : t.what();
    if (w == last && to == i - 1) {
      to = i;
      continue;
    }
    flush();
    last = w;
    from = to = i;
  }
  flush();
  return s.str();
}

// A block's run, in three parts: start_block makes its threads and draws its warp order;
// step_block runs them until every thread has exited, the block has failed, or every live thread
// waits and one of them polls global memory (the block is parked: run_grid runs another block
// and steps this one again once the word has changed); finish_block ends it.
enum class Step { done, parked };

void start_block(Block& b, const std::function<void()>& body, std::mt19937_64& rng) {
  const dim3 bd = b.config.block;
  const int n = static_cast<int>(bd.x * bd.y * bd.z);
  b.threads.clear();
  for (int i = 0; i < n; ++i) {
    auto t = std::make_unique<Thread>();
    t->info.linear = i;
    t->info.thread_idx =
        uint3{static_cast<unsigned>(i) % bd.x, static_cast<unsigned>(i) / bd.x % bd.y,
              static_cast<unsigned>(i) / (bd.x * bd.y)};
    t->info.block_idx = b.idx;
    t->info.block_dim = bd;
    t->info.grid_dim = b.config.grid;
    t->info.warp = i / 32;
    t->info.lane = i % 32;
    Thread* self_ptr = t.get();
#if defined(FSEMU_TSAN)
    // TSan fibers are kept for the process (creating and destroying one per thread of every
    // block costs more than the block): thread i of each block is fiber i, renamed, of the set
    // of the launch's Block object that runs it (blocks that wait on each other are alive at once).
    static std::vector<std::vector<void*>> tsan_sets;
    if (tsan_sets.size() <= b.slot) tsan_sets.resize(b.slot + 1);
    std::vector<void*>& tsan_fibers = tsan_sets[b.slot];
    if (tsan_fibers.size() <= static_cast<std::size_t>(i))
      tsan_fibers.push_back(__tsan_create_fiber(0));
    t->tsan_fiber = tsan_fibers[static_cast<std::size_t>(i)];
    __tsan_set_fiber_name(t->tsan_fiber, where(*t).c_str());
#endif
    t->fiber = bctx::fiber(
        std::allocator_arg, PooledStack{self_ptr, &b}, [self_ptr, &body, &b](bctx::fiber&& sched) {
          back_in_thread(*self_ptr, true);
          self_ptr->scheduler = std::move(sched);
          try {
            if (b.failure.empty()) {  // else the block failed before this thread ever ran
              body();
              events::thread_exit();  // observers check what the thread leaves (may fault)
            }
          } catch (const bctx::detail::forced_unwind&) {
            throw;
          } catch (const LaunchAborted&) {
          } catch (const model::Fault& f) {
            if (b.failure.empty()) b.failure = where(*self_ptr) + ": " + f.what();
          } catch (const std::exception& e) {
            if (b.failure.empty()) b.failure = where(*self_ptr) + ": exception: " + e.what();
          }
          self_ptr->done = true;
          self_ptr->slot->exited();
          ++b.exited;
          // __syncthreads counts exited threads as arrived: the exit may complete barrier 0.
          if (NamedBarrier& bar0 = b.bars[0]; bar0.arrived > 0 &&
                                              bar0.expected == static_cast<int>(b.threads.size()) &&
                                              barrier_complete(b, bar0, true)) {
            bar0.arrived = 0;
            advance(bar0.generation);
          }
          sanitize::release(&b.exit_sync);
          switching_to_scheduler(*self_ptr, true);
          return std::move(self_ptr->scheduler);
        });
    b.threads.push_back(std::move(t));
  }
  const int nwarps = (n + 31) / 32;
  b.warps.assign(static_cast<std::size_t>(nwarps), Collective{});
  b.warpgroups.assign(static_cast<std::size_t>((n + 127) / 128), Collective{});
  for (NamedBarrier& bar : b.bars)
    bar = NamedBarrier{};
  b.exited = 0;

  // Warps start in a drawn order (lanes in order within a warp): a kernel that lacks a barrier
  // between one warp's writes and another's reads sees the poison in shared memory.
  std::vector<int>& order = b.order;
  order.clear();
  std::vector<int> warp_order(static_cast<std::size_t>(nwarps));
  std::iota(warp_order.begin(), warp_order.end(), 0);
  std::shuffle(warp_order.begin(), warp_order.end(), rng);
  std::vector<std::size_t>& segment = b.segment;  // for each position in `order`, its warp's start
  segment.clear();
  for (int w : warp_order) {
    const std::size_t start = order.size();
    for (int l = 0; l < 32 && w * 32 + l < n; ++l) {
      order.push_back(w * 32 + l);
      segment.push_back(start);
    }
  }
  b.slots.assign(order.size(), Slot{});
  for (std::size_t k = 0; k < order.size(); ++k) {
    Thread* t = b.threads[static_cast<std::size_t>(order[k])].get();
    b.slots[k].thread = t;
    t->slot = &b.slots[k];
  }

  // Scheduling: a warp runs as far as it can before the next warp in the drawn order runs. The
  // scan resumes the first runnable thread from `from`, which stays at the start of the warp that
  // ran last; only when no thread from there on can run does it go back to the first warp. So
  // between two block-wide synchronisations every warp runs alone, as far ahead of the others
  // as the kernel allows, and a missing barrier shows: the warp that runs ahead reads another
  // warp's data before it is written (poison), or overwrites data another warp has yet to read.
  b.from = 0;
  b.live = n;
}

Step step_block(Block& b) {
  // Kept in locals while the block runs (the scan below is the emulator's hottest loop), and
  // stored back into the block when it is parked.
  Slot* const slots = b.slots.data();
  const std::size_t* const segment = b.segment.data();
  const std::size_t positions = b.order.size();
  std::size_t from = b.from;
  int live = b.live;
  // The scan starts at `from`, but when the last one passed over every position from `from` up to
  // `passed` by its Slot alone, and no word a thread waits on has changed since, it would pass
  // over them again: it starts at `passed` (so a warp's lanes each reaching a shuffle cost one
  // scan each, not one from the warp's start each).
  std::size_t passed = from;
  while (live > 0 && b.failure.empty()) {
    bool progress = false;
    const std::uint64_t changes = g_word_changes;
    std::size_t k = std::max(from, passed);
    passed = from;
    bool clean = true;  // every position so far passed over by its Slot
    for (; k < positions; ++k) {
      Slot& slot = slots[k];
      if (*slot.watch == slot.value) continue;  // exited, or waits for a word that has not changed
      if (clean) passed = k;
      clean = false;
      Thread& t = *slot.thread;
      if (t.done) continue;
      if (t.waiting && t.watch) {  // the word it waits for has changed
        t.watch = nullptr;
        t.waiting = false;
        slot.runnable();
      }
      if (t.waiting) {
        b.current = &t;  // predicates may call into the shim (mbarrier landing copies)
#if defined(FSEMU_TSAN)
        // What a predicate does (it may land copies) is done by the thread that waits.
        __tsan_switch_to_fiber(t.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
        bool ok = false;
        try {
          ok = t.ready();
        } catch (const model::Fault& f) {
          if (b.failure.empty()) b.failure = where(t) + ": " + f.what();
        } catch (const LaunchAborted&) {
        }
#if defined(FSEMU_TSAN)
        __tsan_switch_to_fiber(g_scheduler_fiber, __tsan_switch_to_fiber_no_sync);
#endif
        b.current = nullptr;
        if (!b.failure.empty()) break;
        if (!ok) continue;
        t.waiting = false;
      }
      b.current = &t;
      switching_to_thread(t);
      t.fiber = std::move(t.fiber).resume();
      back_in_scheduler();
      b.current = nullptr;
      progress = true;
      if (t.done) --live;
      from = segment[k];
      if (g_word_changes != changes || passed < from) passed = from;
      if (t.yielding) {  // it released a word a parked block waits on: either may run next
        t.yielding = false;
        b.yielded = true;
        b.from = from;
        b.live = live;
        return Step::parked;
      }
      break;
    }
    if (!progress && from > 0) {  // nothing from this warp on: back to the first warp
      from = 0;
      passed = 0;
      continue;
    }
    if (!progress && b.failure.empty()) {
      for (const auto& t : b.threads)  // a thread polls global memory: another block may change it
        if (!t->done && t->polling) {
          b.from = from;
          b.live = live;
          return Step::parked;
        }
      std::ostringstream s;
      s << "deadlock: every live thread of the block waits and nothing it waits for can happen";
      s << thread_waits(b, "\n  ");
      b.failure = "block (" + std::to_string(b.idx.x) + ", " + std::to_string(b.idx.y) + ", " +
                  std::to_string(b.idx.z) + "): " + s.str();
    }
  }
  return Step::done;
}

// Ends a block that is done, failed, or (with b.failure set) parked when the launch failed;
// returns false (with b.failure set) if it failed.
bool finish_block(Block& b) {
  if (b.failure.empty()) {
    try {
      events::block_exit();  // observers check what the block leaves (may fault)
    } catch (const LaunchAborted&) {
    } catch (const model::Fault& f) {
      if (b.failure.empty()) b.failure = f.what();
    }
  }
  // A failed block: every thread that has not exited is resumed once more, to unwind its stack
  // (suspend() throws LaunchAborted; a thread that never ran returns at once) and leave its
  // fiber the way every thread does, through switches the sanitizer builds announce.
  for (auto& t : b.threads) {
    if (t->done || !t->fiber) continue;
    b.current = t.get();
    switching_to_thread(*t);
    t->fiber = std::move(t->fiber).resume();
    back_in_scheduler();
    b.current = nullptr;
  }
  // Had one not finished (it cannot), destroying its fiber would unwind it (forced_unwind).
  for (auto& t : b.threads) {
    b.current = t.get();
    t->fiber = bctx::fiber{};
    b.current = nullptr;
  }
  sanitize::acquire(&b.exit_sync);
#if defined(FSEMU_TSAN)
  for (bctx::stack_context& s : b.retired_stacks)
    stack_pool().deallocate(s);
  b.retired_stacks.clear();
#endif
  b.threads.clear();
  events::block_end();  // observers drop what they kept for the block
  return b.failure.empty();
}

#if defined(FSEMU_ASAN)
// Appended to an ASan report: which CUDA thread made the access, and where the address is in the
// block's shared memory if it is in the window's storage.
void report_cuda_thread(const char*) {
  const Block* b = g_block;
  if (!b) return;
  std::string s = "fsemu: the emulator was running ";
  s += b->current ? where(*b->current)
                  : "block (" + std::to_string(b->idx.x) + ", " + std::to_string(b->idx.y) + ", " +
                        std::to_string(b->idx.z) + ") (its scheduler, no thread)";
  const auto* a = static_cast<const std::uint8_t*>(__asan_get_report_address());
  const std::uint8_t* lo = b->window_storage.data();
  if (a >= lo && a < lo + b->window_storage.size()) {
    const std::ptrdiff_t addr = a - b->window.base;
    const std::size_t begin = b->dynamic_offset, end = begin + b->config.dynamic_smem;
    std::ostringstream m;
    m << "; the address is shared memory " << (addr < 0 ? "-" : "") << "0x" << std::hex
      << (addr < 0 ? -addr : addr) << ", outside the block's dynamic shared memory 0x" << begin
      << " .. 0x" << end << " (" << std::dec << b->config.dynamic_smem << " bytes)";
    s += m.str();
  }
  std::fprintf(stderr, "%s\n", s.c_str());
}
#endif

}  // namespace

#if defined(FSEMU_ASAN) || defined(FSEMU_TSAN)
namespace sanitize {
namespace {
int g_bookkeeping_depth = 0;
}
#if defined(FSEMU_TSAN)
namespace {
// The context TSan runs as: a thread (also while the scheduler tests what it waits for), or the
// scheduler.
int& ignore_depth() {
  return g_block && g_block->current ? g_block->current->ignore_depth : g_scheduler_ignore_depth;
}
}  // namespace
void ignore_begin() {
  if (ignore_depth()++ == 0) __tsan_ignore_thread_begin();
}
void ignore_end() {
  if (--ignore_depth() == 0) __tsan_ignore_thread_end();
}
Visible::Visible() : saved_(ignore_depth()) {
  if (saved_ > 0) __tsan_ignore_thread_end();
  ignore_depth() = 0;
}
Visible::~Visible() {
  ignore_depth() = saved_;
  if (saved_ > 0) __tsan_ignore_thread_begin();
}
#endif
Bookkeeping::Bookkeeping() {
  if (g_bookkeeping_depth++ > 0) return;
#if defined(FSEMU_ASAN)
  if (g_block) __asan_unpoison_memory_region(g_block->window.base, g_block->window.size);
#endif
#if defined(FSEMU_TSAN)
  ignore_begin();
#endif
}
Bookkeeping::~Bookkeeping() {
  if (--g_bookkeeping_depth > 0) return;
#if defined(FSEMU_ASAN)
  if (g_block) poison_window(*g_block);
#endif
#if defined(FSEMU_TSAN)
  ignore_end();
#endif
}
}  // namespace sanitize
#endif

namespace {

// Whether a parked block may run again: it stepped aside after a release, or a word one of its
// threads polls has changed.
bool woken(const Block& b) {
  if (b.yielded) return true;
  for (const auto& t : b.threads)
    if (!t->done && t->polling &&
        word_at(t->poll_wait.addr, t->poll_wait.size) != t->poll_wait.value)
      return true;
  return false;
}

}  // namespace

void yield_after_release() {
  if (!g_parked || g_parked->empty()) return;
  bool wakes = false;
  for (const Block* p : *g_parked)
    wakes = wakes || woken(*p);
  // Whether the releasing block goes on or steps aside (and the drawn order then picks which of
  // it and the blocks it woke runs next) is drawn: either may happen on the GPU.
  if (!wakes || ((*g_rng)() & 1) == 0) return;
  current().yielding = true;
  suspend();
}

namespace {

std::string block_name(const uint3& idx) {
  return "block (" + std::to_string(idx.x) + ", " + std::to_string(idx.y) + ", " +
         std::to_string(idx.z) + ")";
}

// Every resident block is parked and no word any of them polls has changed: the report names
// each block and what its threads wait for, and the residency that kept the others out.
std::string grid_deadlock(const std::vector<Block*>& parked, std::uint64_t limit,
                          std::uint64_t per_sm, std::uint64_t next, std::uint64_t nblocks) {
  std::ostringstream s;
  s << "deadlock between blocks: every resident block waits on global memory that no resident "
       "block changes ("
    << parked.size() << " resident, at most " << limit << " at once: " << per_sm
    << " per SM on the emulated device's " << device_limits::kSmCount
    << " SMs for this launch; blocks are dispatched in linear order of blockIdx and "
    << (next < nblocks ? std::to_string(nblocks - next) + " of the grid's " +
                             std::to_string(nblocks) + " blocks, from linear index " +
                             std::to_string(next) + " on, cannot be dispatched while they wait"
                       : std::string("every block of the grid has been dispatched"))
    << "; emu/README.md, \"Blocks that wait on each other\")";
  std::vector<Block*> sorted = parked;
  std::sort(sorted.begin(), sorted.end(),
            [](const Block* a, const Block* b) { return a->linear < b->linear; });
  for (const Block* b : sorted) {
    s << "\n  " << block_name(b->idx) << ":" << thread_waits(*b, "\n    ");
  }
  return s.str();
}

}  // namespace

std::string run_grid(const LaunchConfig& config, const std::function<void()>& body) {
  if (g_block) return "fsemu: a kernel launched from inside a kernel (not supported)";
  const dim3 g = config.grid, bd = config.block;
  const std::uint64_t nblocks = std::uint64_t{g.x} * g.y * g.z;
  const std::uint64_t nthreads = std::uint64_t{bd.x} * bd.y * bd.z;
  if (nthreads == 0 || nthreads > 1024 || nblocks == 0)
    return "fsemu: invalid launch configuration: " + std::to_string(nthreads) +
           " threads per block (1..1024), " + std::to_string(nblocks) + " blocks";
  // Shared memory: the window starts kDynamicSmemOffset bytes before the dynamic part; all of it
  // is poisoned (0xFF: NaN in fp16, bf16 and fp32) before each block, so a read of shared memory
  // nothing wrote gives NaN instead of a stale value from the previous block. A Block object (its
  // window, its threads) is reused by the next block once its block has ended; a launch has more
  // than one only while blocks are parked.
  const std::size_t window = kMaxDynamicSmemOffset + config.dynamic_smem;
  std::vector<std::unique_ptr<Block>> slots;
  std::vector<Block*> free_slots;
  auto take_block = [&]() -> Block& {
    if (!free_slots.empty()) {
      Block* b = free_slots.back();
      free_slots.pop_back();
      return *b;
    }
    slots.push_back(std::make_unique<Block>());
    Block& b = *slots.back();
    b.slot = slots.size() - 1;
    b.config = config;
    b.window_storage.assign(window + 4096, 0);
    auto base = reinterpret_cast<std::uintptr_t>(b.window_storage.data());
    b.window.base = reinterpret_cast<std::uint8_t*>((base + 4095) & ~std::uintptr_t{4095});
    b.window.size = static_cast<std::uint32_t>(window);
    return b;
  };

  // The drawn order: which resident block runs next is the first of it that can run.
  std::vector<std::uint64_t> order(nblocks);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(schedule_seed() ^ (nblocks * 0x9E3779B97F4A7C15ULL));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::uint64_t> rank(nblocks);
  for (std::uint64_t k = 0; k < nblocks; ++k)
    rank[order[k]] = k;
  // Residency (emu/README.md, "Blocks that wait on each other"): blocks are dispatched in linear
  // order of their index, at most `limit` resident at once; a block leaves when it ends.
  const std::uint64_t per_sm = device_limits::blocks_per_sm(nthreads, config.dynamic_smem);
  const std::uint64_t limit = per_sm * device_limits::kSmCount;
  std::set<std::pair<std::uint64_t, std::uint64_t>> startable;  // (rank, linear): not started
  std::uint64_t next = 0, resident = 0;
  std::vector<Block*> parked;
  g_parked = &parked;
  g_rng = &rng;

#if defined(FSEMU_ASAN)
  static const bool callback_set = [] {
    __asan_set_error_report_callback(report_cuda_thread);
    return true;
  }();
  (void)callback_set;
#endif
#if defined(FSEMU_TSAN)
  g_scheduler_fiber = __tsan_get_current_fiber();
#endif
  std::string failure;
  Progress progress(nblocks);  // on a terminal, once the launch takes more than ~2 s
  for (;;) {
    while (resident < limit && next < nblocks) {
      const std::uint64_t id = next++;
      if (config.run_block && !config.run_block(id, nblocks)) continue;
      startable.emplace(rank[id], id);
      ++resident;
    }
    Block* again = nullptr;  // the parked block to run again, if it comes first
    for (Block* p : parked)
      if ((!again || rank[p->linear] < rank[again->linear]) && woken(*p)) again = p;
    const bool fresh =
        !startable.empty() && (!again || startable.begin()->first < rank[again->linear]);
    if (!fresh && !again) {
      if (!parked.empty()) failure = grid_deadlock(parked, limit, per_sm, next, nblocks);
      break;
    }
    Block* b = again;
    if (fresh) {
      const std::uint64_t id = startable.begin()->second;
      startable.erase(startable.begin());
      b = &take_block();
      b->linear = id;
      b->failure.clear();
      b->idx = uint3{static_cast<unsigned>(id % g.x), static_cast<unsigned>(id / g.x % g.y),
                     static_cast<unsigned>(id / (std::uint64_t{g.x} * g.y))};
      b->window.size = static_cast<std::uint32_t>(window);
      std::memset(b->window.base, 0xFF, b->window.size);
      b->dynamic_offset = kDynamicSmemOffset;
      g_block = b;
      poison_window(*b);
      events::block_begin(events::Block{b->idx, static_cast<int>(nthreads)});
      start_block(*b, body, rng);
    } else {
      parked.erase(std::find(parked.begin(), parked.end(), b));
      b->yielded = false;
      g_block = b;
      events::block_resume(events::Block{b->idx, static_cast<int>(nthreads)});
    }
    if (step_block(*b) == Step::parked) {
      events::block_park(events::Block{b->idx, static_cast<int>(nthreads)});
      parked.push_back(b);
      g_block = nullptr;
      continue;
    }
    const bool ok = finish_block(*b);
    unpoison_window(*b);
    g_block = nullptr;
    free_slots.push_back(b);
    --resident;
    if (!ok) {
      failure = b->failure;
      break;
    }
    progress.block_done();
  }
  // The launch failed with blocks parked: each is resumed to unwind its threads, and ends.
  for (Block* b : parked) {
    g_block = b;
    events::block_resume(events::Block{b->idx, static_cast<int>(nthreads)});
    b->failure = "(the launch failed)";
    finish_block(*b);
    unpoison_window(*b);
  }
  progress.end();
  g_block = nullptr;
  g_parked = nullptr;
  g_rng = nullptr;
  if (!failure.empty()) {
    failure = "fsemu: " + failure;
    std::fprintf(stderr, "%s\n", failure.c_str());
  }
  return failure;
}

}  // namespace fsemu
