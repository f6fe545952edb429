// emu/src/lifetime.cpp — the lifetimes of in-flight wgmma operands and accumulators
// (lifetime.hpp).
#include "lifetime.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fsemu/access.hpp"
#include "fsemu/events.hpp"
#include "fsemu/model/fault.hpp"
#include "sanitize.hpp"
#include "state.hpp"

namespace fsemu::lifetime {

namespace {

struct Record {  // one wgmma, by sequence number - 1
  int warpgroup;
  int n;
  bool a_shared;
  const void* pc;
};

struct State {
  // Per warpgroup: per byte of the window, (seq << 3) | readers, readers 0..3 = that warp of the
  // warpgroup, 4 = all of them; 0 = no wgmma has read it. Empty until the warpgroup's first wgmma.
  std::vector<std::vector<std::uint32_t>> shadow;
  std::vector<Record> records;
  std::unordered_map<const void*, WarpClock> syncs;  // knowledge released into each sync object
  std::uint32_t window_bytes = 0;
  int observer = -1;
};
State* g_state = nullptr;

constexpr std::uint32_t kAllWarps = 4;

std::string hex(std::uint64_t v) {
  return "0x" + model::SharedWindow::hex(v);
}

void join(WarpClock& into, const WarpClock& from) {
  for (std::size_t i = 0; i < into.size(); ++i)
    into[i] = std::max(into[i], from[i]);
}

std::string describe(std::uint32_t seq) {
  const Record& r = g_state->records[seq - 1];
  return "wgmma.mma_async.m64n" + std::to_string(r.n) + "k16 #" + std::to_string(seq) +
         " of warpgroup " + std::to_string(r.warpgroup) + " (issued at " +
         access::describe_pc(r.pc) + ")";
}

// The first byte of shared [addr, addr + bytes) that a wgmma the writer does not know to be
// complete may still read: its message, or "" if there is none.
std::string conflict(std::uint32_t addr, std::uint32_t bytes, const WarpClock& known) {
  const std::uint32_t end = std::min(addr + bytes, g_state->window_bytes);
  for (std::size_t g = 0; g < g_state->shadow.size(); ++g) {
    const std::vector<std::uint32_t>& shadow = g_state->shadow[g];
    if (shadow.empty()) continue;
    for (std::uint32_t b = addr; b < end; ++b) {
      const std::uint32_t v = shadow[b];
      if (v == 0) continue;
      const std::uint32_t seq = v >> 3, readers = v & 7;
      const std::size_t w0 = 4 * g, w1 = readers == kAllWarps ? w0 + 4 : w0 + readers + 1;
      for (std::size_t w = readers == kAllWarps ? w0 : w0 + readers; w < w1; ++w) {
        if (known[w] >= seq) continue;
        return "shared memory " + hex(addr) + ".." + hex(addr + bytes - 1) + ", of which " +
               hex(b) + " is an operand byte that " + describe(seq) + " may still read (its " +
               (readers == kAllWarps ? std::string("B operand")
                                     : "A operand, rows of warp " + std::to_string(w)) +
               "): no wgmma.wait_group of warp " + std::to_string(w) +
               " that covers it happens before this write (PTX ISA, wgmma.mma_async: a wgmma may "
               "read its shared-memory operands until the wgmma.wait_group that covers it)";
      }
    }
  }
  return {};
}

// Observer of the kernels' stores (fsemu/access.hpp). Called from hooks the compiler declares
// nothrow: a fault is recorded (report_fault) and ends the launch at the thread's next wait.
void on_access(void*, const access::Access& a) {
  if (!a.write || !g_state || !in_thread()) return;
  ThreadExtra& t = thread_extra();
  const model::SharedWindow& w = shared_window();
  const auto* p = static_cast<const std::uint8_t*>(a.addr);
  auto store = [&a] {  // only for a report: the hot path builds no string
    return "a store of " + std::to_string(a.size) + " bytes at " + access::describe_pc(a.pc);
  };
  if (p >= w.base && p < w.base + w.size) {
    const std::string c = conflict(static_cast<std::uint32_t>(p - w.base), a.size, t.known);
    if (!c.empty()) report_fault(store() + " writes " + c);
    return;
  }
  for (const PendingMma& m : t.mmas) {
    const auto* d = reinterpret_cast<const std::uint8_t*>(m.d);
    const auto* r = reinterpret_cast<const std::uint8_t*>(m.a_regs);
    std::string what;
    std::ptrdiff_t i = 0;
    if (p + a.size > d && p < d + 4 * m.regs) {
      i = (p - d) / 4;
      what = "register " + std::to_string(i) + " of its accumulator fragment (" +
             std::to_string(m.regs) + " fp32 registers: d[0.." + std::to_string(m.regs - 1) + "])";
    } else if (r && p + a.size > r && p < r + 16) {
      i = (p - r) / 4;
      what = "register " + std::to_string(i) + " of its A-operand fragment (4 registers)";
    } else {
      continue;
    }
    report_fault(store() + " writes " + what + " of " + describe(m.seq) +
                 ", which is still in flight: no wgmma.wait_group of this thread covers it yet "
                 "(PTX ISA, wgmma.mma_async: accessing the accumulator or A registers before the "
                 "wgmma.wait_group that covers the operation is undefined behaviour)");
    return;
  }
  if (t.wgmma_fenced) t.fenced_stores.push_back(FencedStore{p, a.size, a.pc});
}

// The tracking ends with the block.
void end_tracking() {
  if (!g_state) return;
  access::detach(g_state->observer);
  delete g_state;
  g_state = nullptr;
}

// The scheduler's events (fsemu/events.hpp), observed while a block is tracked: the running
// thread releases its knowledge into the synchronisation object `sync`, or acquires what others
// released there; the block's end ends the tracking. The map of sync objects is the emulator's
// bookkeeping, which every CUDA thread of the block updates: not the kernel's accesses, for TSan
// (sanitize.hpp; a rehash of the map frees memory another thread allocated).
class SchedulerEvents final : public events::Observer, public events::SyncObserver {
 public:
  void release(const void* sync) override {
    if (!in_thread()) return;
    const sanitize::IgnoreAccesses bookkeeping;
    join(g_state->syncs[sync], thread_extra().known);
  }
  void acquire(const void* sync) override {
    if (!in_thread()) return;
    const sanitize::IgnoreAccesses bookkeeping;
    const auto it = g_state->syncs.find(sync);
    if (it != g_state->syncs.end()) join(thread_extra().known, it->second);
  }
  void block_end() override {
    events::unsubscribe(this);
    events::unsubscribe_sync(this);
    end_tracking();
  }
};
SchedulerEvents g_events;

// A parked block's tracking waits aside until it resumes (fsemu/events.hpp): its observers are
// detached meanwhile, so the blocks that run in between are not tracked as its. Subscribed from
// the first wgmma on, for the program.
class Parking final : public events::Observer {
 public:
  void block_park(const events::Block& b) override {
    if (!g_state) return;
    access::detach(g_state->observer);
    g_state->observer = -1;
    events::unsubscribe(&g_events);
    events::unsubscribe_sync(&g_events);
    parked_[b.key()] = std::exchange(g_state, nullptr);
  }
  void block_resume(const events::Block& b) override {
    const auto it = parked_.find(b.key());
    if (it == parked_.end()) return;
    g_state = it->second;
    parked_.erase(it);
    g_state->observer = access::attach(on_access, nullptr);
    access::plain_reads(g_state->observer, false);  // it observes stores only
    events::subscribe(&g_events);
    events::subscribe_sync(&g_events);
  }

 private:
  std::map<std::uint64_t, State*> parked_;
};
Parking g_parking;

}  // namespace

std::uint32_t begin_wgmma(int warpgroup, int n, bool a_shared, const void* pc) {
  if (!g_state) {
    static const bool parking = (events::subscribe(&g_parking), true);
    (void)parking;
    g_state = new State;
    g_state->window_bytes = shared_window().size;
    g_state->observer = access::attach(on_access, nullptr);
    access::plain_reads(g_state->observer, false);  // it observes stores only
    events::subscribe(&g_events);                   // until the block ends
    events::subscribe_sync(&g_events);
  }
  if (g_state->shadow.size() <= static_cast<std::size_t>(warpgroup))
    g_state->shadow.resize(static_cast<std::size_t>(warpgroup) + 1);
  std::vector<std::uint32_t>& shadow = g_state->shadow[static_cast<std::size_t>(warpgroup)];
  if (shadow.empty()) shadow.assign(g_state->window_bytes, 0);
  g_state->records.push_back(Record{warpgroup, n, a_shared, pc});
  return static_cast<std::uint32_t>(g_state->records.size());
}

void mark_operand(std::uint32_t seq, std::uint32_t addr, int warp) {
  const Record& r = g_state->records[seq - 1];
  std::vector<std::uint32_t>& shadow = g_state->shadow[static_cast<std::size_t>(r.warpgroup)];
  const std::uint32_t v = seq << 3 | (warp < 0 ? kAllWarps : static_cast<std::uint32_t>(warp));
  for (std::uint32_t b = addr; b < addr + 2 && b < g_state->window_bytes; ++b)
    shadow[b] = v;
}

void waited(ThreadExtra& t, int warp, std::uint32_t seq) {
  std::uint32_t& k = t.known[static_cast<std::size_t>(warp)];
  k = std::max(k, seq);
}

void check_fenced_registers(const ThreadExtra& t, const float* d, int regs,
                            const std::uint32_t* a_regs) {
  const auto* acc = reinterpret_cast<const std::uint8_t*>(d);
  const auto* a = reinterpret_cast<const std::uint8_t*>(a_regs);
  for (const FencedStore& s : t.fenced_stores) {
    std::string what;
    if (s.addr + s.bytes > acc && s.addr < acc + 4 * regs) {
      what = "register " + std::to_string((s.addr - acc) / 4) + " of its accumulator fragment";
    } else if (a && s.addr + s.bytes > a && s.addr < a + 16) {
      what = "register " + std::to_string((s.addr - a) / 4) + " of its A-operand fragment";
    } else {
      continue;
    }
    fault("wgmma.mma_async uses " + what + ", which a store of " + std::to_string(s.bytes) +
          " bytes at " + access::describe_pc(s.pc) +
          " wrote after the last wgmma.fence: no wgmma.fence between the store and the wgmma "
          "(PTX ISA, wgmma.fence: required between a register access and a wgmma.mma_async "
          "using those registers)");
  }
}

void check_shared_write(std::uint32_t addr, std::uint32_t bytes, const char* writer,
                        const void* pc) {
  if (!g_state) return;
  const std::string c = conflict(addr, bytes, thread_extra().known);
  if (!c.empty())
    fault(std::string(writer) + " issued at " + access::describe_pc(pc) + " writes " + c);
}

}  // namespace fsemu::lifetime
