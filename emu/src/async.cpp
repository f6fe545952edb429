// emu/src/async.cpp — cp.async groups, mbarriers, TMA, the bulk reduce-add and the proxy fence
// (fsemu/async.hpp), over the models of fsemu/model/mbarrier.hpp and fsemu/model/tma.hpp; and,
// observing the scheduler's events (fsemu/events.hpp), the end-of-thread and end-of-block checks
// that nothing is left in flight.
#include "fsemu/async.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "fsemu/access.hpp"
#include "fsemu/events.hpp"
#include "fsemu/model/tma.hpp"
#include "global_races.hpp"
#include "lifetime.hpp"
#include "profile.hpp"
#include "sanitize.hpp"
#include "state.hpp"
#include "trace.hpp"

namespace fsemu {
namespace {

constexpr std::uint8_t kPoison = 0xFF;                     // NaN in fp16, bf16 and fp32
constexpr std::uint64_t kTagBase = 0x6d62617200000000ULL;  // "mbar" + the shared address

std::string hex(std::uint64_t v) {
  return "0x" + model::SharedWindow::hex(v);
}

std::uint64_t tag(std::uint32_t addr) {
  return kTagBase | addr;
}

std::vector<std::uint8_t>& async_view() {
  BlockExtra& b = block_extra();
  model::SharedWindow& w = shared_window();
  // Created with the block's poisoned window: nothing written yet, by either proxy.
  if (b.async_view.empty()) {
    sanitize::Bookkeeping whole_window;
    b.async_view.assign(w.base, w.base + w.size);
  }
  return b.async_view;
}

// TSan happens-before edges of an mbarrier (sanitize.hpp), at addresses inside its MBar: an
// arrival in a phase of parity p releases sync(b, p), a wait that sees that phase complete
// acquires it; issuing a copy that completes on it releases sync(b, 2), and whoever lands the
// copy acquires that first and releases the phase's after (the landing's writes happen before
// the waiter's reads).
const char* sync(const MBar& b, std::uint32_t i) {
  return reinterpret_cast<const char*>(&b) + i;
}

// ---- cp.async destinations in flight ----------------------------------------------------------
// From its issue until it lands (its issuer's cp.async.wait_group / wait_all covers it, or the
// mbarrier its cp.async.mbarrier.arrive is tied to is waited on) a cp.async may write its
// destination at any moment: "No other synchronization mechanism guarantees the completion of the
// asynchronous copy operations", and "there is no ordering guarantee between two cp.async
// operations" without such a wait (PTX ISA, cp.async). The emulator lands it at that wait, so an
// ordinary store into its bytes before then was simply overwritten by the landing and went
// unseen; on the GPU the copy may land before or after the store. Each destination byte is marked
// with its issuer (BlockExtra::copy_owner) until the landing; a store (seen through
// fsemu/access.hpp) or another cp.async into a marked byte is reported with the writer, the bytes
// and the copy's issue line, as the wgmma operand lock reports its own (lifetime.hpp).

std::string thread_name(int linear) {
  const ThreadInfo& me = self();
  const dim3 bd = me.block_dim;
  const auto l = static_cast<unsigned>(linear);
  return "thread (" + std::to_string(l % bd.x) + ", " + std::to_string(l / bd.x % bd.y) + ", " +
         std::to_string(l / (bd.x * bd.y)) + ") = warp " + std::to_string(linear / 32) + " lane " +
         std::to_string(linear % 32);
}

// The first byte of shared [addr, addr + bytes) that a cp.async still in flight will write: its
// message ("" if none).
std::string in_flight(const BlockExtra& b, std::uint32_t addr, std::uint32_t bytes) {
  const std::uint32_t end =
      std::min<std::uint32_t>(addr + bytes, static_cast<std::uint32_t>(b.copy_owner.size()));
  for (std::uint32_t x = addr; x < end; ++x) {
    const int owner = b.copy_owner[x];
    if (owner == 0) continue;
    const ThreadExtra* t = find_thread_extra(owner - 1);
    const std::uint8_t* p = shared_window().base + x;
    const PendingCopy* copy = nullptr;
    if (t)
      for (const PendingCopy& c : t->copies)
        if (p >= c.dst && p < c.dst + c.bytes) copy = &c;
    return "shared memory " + hex(addr) + ".." + hex(addr + bytes - 1) + ", of which " + hex(x) +
           " is in the destination of a cp.async" +
           (copy ? " of " + std::to_string(copy->bytes) + " bytes issued at " +
                       access::describe_pc(copy->pc)
                 : std::string()) +
           " by " + (owner - 1 == self().linear ? "this thread" : thread_name(owner - 1)) +
           ", still in flight: its issuer has not waited for it (no cp.async.wait_group or "
           "wait_all of its group, no wait on the mbarrier its arrival is tied to), so on the GPU "
           "the copy may land after this write and overwrite it (PTX ISA, cp.async: only those "
           "waits guarantee a copy's completion)";
  }
  return {};
}

// ---- bulk reduce-adds in flight -----------------------------------------------------------------
// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 (PTX ISA, cp.reduce.async.bulk) reads
// its source at some moment before a cp.async.bulk.wait_group.read covers its bulk async-group,
// and its adds into global memory (each element an atomic, relaxed, gpu-scope add) are complete
// and visible only once a cp.async.bulk.wait_group without .read covers it. The emulator takes
// the latest moments the rules allow: it reads the source at the covering .read wait (or the full
// wait, whichever comes first) and adds at the full wait; one that only a .read wait covered adds
// when the whole grid has run (finish_launch). Until it has read its source, a store (or a copy)
// into those bytes may change what it adds: reported, naming the writer and the reduce's issue
// line. Until it has added, a plain load or store of its destination by its own block is a race
// with it: reported (another block's is the race check's: global_races.hpp).

// Reduce-adds of the running block in flight (a fast test for the observer below; blocks run one
// at a time).
std::size_t g_block_reduces = 0;
int g_access_observer = -1;  // on_access's handle, once attached (watch_accesses)
// Sets g_block_reduces; while it is 0 the observer takes no reads (it returns from them at once),
// so the hooks do not call it for them (access::plain_reads).
void set_block_reduces(std::size_t n) {
  g_block_reduces = n;
  if (g_access_observer >= 0) access::plain_reads(g_access_observer, n != 0);
}

struct Deferred {  // a reduce-add whose source was read, applied when the grid has run
  float* dst;
  std::vector<float> data;
};
std::vector<Deferred> g_deferred;

// The adds themselves: each element one atomic read-modify-write (the emulator's threads run one
// at a time, so it is atomic by construction; the compiler's atomics say so all the same), fp32
// rounded to nearest even.
void add_into(float* dst, const std::vector<float>& data) {
  for (std::size_t i = 0; i < data.size(); ++i) {
    auto* w = reinterpret_cast<std::uint32_t*>(dst + i);
    std::uint32_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
    for (;;) {
      float before;
      std::memcpy(&before, &old, sizeof before);
      const float after = before + data[i];
      std::uint32_t bits;
      std::memcpy(&bits, &after, sizeof bits);
      if (__atomic_compare_exchange_n(w, &old, bits, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        break;
    }
  }
}

std::string reduce_name(const PendingReduce& r) {
  return "a cp.reduce.async.bulk.add.f32 of " + std::to_string(r.bytes) + " bytes issued at " +
         access::describe_pc(r.pc) + " by " +
         (r.issuer == self().linear ? "this thread" : thread_name(r.issuer));
}

// The first byte of shared [addr, addr + bytes) that a reduce-add in flight has yet to read: its
// message ("" if none).
std::string unread_source(const BlockExtra& b, std::uint32_t addr, std::uint32_t bytes) {
  const std::uint32_t end =
      std::min<std::uint32_t>(addr + bytes, static_cast<std::uint32_t>(b.reduce_unread.size()));
  for (std::uint32_t x = addr; x < end; ++x) {
    if (b.reduce_unread[x] == 0) continue;
    for (const PendingReduce& r : b.reduces)
      if (!r.read && x >= r.src && x < r.src + r.bytes)
        return "shared memory " + hex(addr) + ".." + hex(addr + bytes - 1) + ", of which " +
               hex(x) + " is in the source of " + reduce_name(r) +
               ", not read yet: no cp.async.bulk.wait_group.read covers its bulk async-group, so "
               "on the GPU the reduce may read this write and add it into global memory (PTX "
               "ISA, cp.async.bulk.wait_group: only the .read wait guarantees its source was "
               "read)";
  }
  return {};
}

// The reduce-add of the block in flight whose destination overlaps [p, p + size), or null.
const PendingReduce* reducing_into(const BlockExtra& b, const std::uint8_t* p, std::uint32_t size) {
  for (const PendingReduce& r : b.reduces) {
    const auto* d = reinterpret_cast<const std::uint8_t*>(r.dst);
    if (p < d + r.bytes && d < p + size) return &r;
  }
  return nullptr;
}

// Observer of the kernels' accesses (fsemu/access.hpp), attached at the program's first cp.async
// or bulk reduce-add. Called from hooks the compiler declares nothrow: a fault is recorded
// (report_fault).
void on_access(void*, const access::Access& a) {
  if ((!a.write && g_block_reduces == 0) || !in_thread()) return;
  const BlockExtra* b = find_block_extra();
  if (!b || (b->copies_in_flight == 0 && b->reduces.empty())) return;
  const model::SharedWindow& w = shared_window();
  const auto* p = static_cast<const std::uint8_t*>(a.addr);
  const bool shared = p >= w.base && p < w.base + w.size;
  const auto what = [&a] {
    return std::string(a.atomic  ? "an atomic update"
                       : a.write ? "a store"
                                 : "a load") +
           " of " + std::to_string(a.size) + " bytes at " + access::describe_pc(a.pc);
  };
  if (!shared) {
    if (a.atomic || b->reduces.empty()) return;  // atomics and the reduce's adds go together
    if (const PendingReduce* r = reducing_into(*b, p, a.size))
      report_fault(what() + (a.write ? " writes" : " reads") + " global memory " +
                   hex(reinterpret_cast<std::uintptr_t>(p)) + " that " + reduce_name(*r) +
                   " is still adding into: " +
                   (r->read ? "a cp.async.bulk.wait_group.read covered it, which guarantees only "
                              "that its source was read, "
                            : "") +
                   "only a cp.async.bulk.wait_group without .read guarantees its writes are "
                   "complete and visible (PTX ISA, cp.async.bulk.wait_group), so on the GPU this "
                   "access races with its adds");
    return;
  }
  if (!a.write) return;
  const auto addr = static_cast<std::uint32_t>(p - w.base);
  if (!b->reduces.empty() && addr < b->reduce_unread.size())
    if (const std::string r = unread_source(*b, addr, a.size); !r.empty()) {
      report_fault(what() + " writes " + r);
      return;
    }
  if (b->copies_in_flight == 0) return;
  const std::uint32_t end =
      std::min<std::uint32_t>(addr + a.size, static_cast<std::uint32_t>(b->copy_owner.size()));
  bool marked = false;
  for (std::uint32_t x = addr; x < end; ++x)
    marked |= b->copy_owner[x] != 0;
  if (!marked) return;
  const std::string c = in_flight(*b, addr, a.size);
  if (!c.empty()) report_fault(what() + " writes " + c);
}

void watch_accesses() {
  if (g_access_observer >= 0) return;
  g_access_observer = access::attach(on_access, nullptr);  // for the program
  access::plain_reads(g_access_observer, g_block_reduces != 0);
}

void mark_in_flight(const PendingCopy& c) {
  BlockExtra& b = block_extra();
  const model::SharedWindow& w = shared_window();
  if (b.copy_owner.size() < w.size) b.copy_owner.resize(w.size, 0);
  const auto a = static_cast<std::uint32_t>(c.dst - w.base);
  std::fill(b.copy_owner.begin() + a, b.copy_owner.begin() + a + c.bytes,
            static_cast<std::uint16_t>(c.issuer + 1));
  ++b.copies_in_flight;
  watch_accesses();
}

void land(const PendingCopy& c) {
  {
    const sanitize::Visible copy;  // the copy's accesses, as the thread that lands it
    std::memcpy(c.dst, c.src, c.src_bytes);
    std::memset(c.dst + c.src_bytes, 0, c.bytes - c.src_bytes);
  }
  BlockExtra& b = block_extra();
  const auto a = static_cast<std::size_t>(c.dst - shared_window().base);
  for (std::size_t x = a; x < a + c.bytes && x < b.copy_owner.size(); ++x)
    if (b.copy_owner[x] == c.issuer + 1) b.copy_owner[x] = 0;
  --b.copies_in_flight;
}

// Lands cp.async copies of `t` with id <= upto (all when upto is 0).
void land_copies(ThreadExtra& t, std::uint64_t upto) {
  std::vector<PendingCopy> keep;
  for (const PendingCopy& c : t.copies) {
    if (upto == 0 || c.id <= upto)
      land(c);
    else
      keep.push_back(c);
  }
  t.copies = std::move(keep);
}

MBar& mbar(std::uint64_t* p, const char* what) {
  const std::uint32_t a = shared_address(p, what);
  auto& bars = block_extra().bars;
  const auto it = bars.find(a);
  if (it == bars.end() || !it->second.m.initialized())
    fault(std::string(what) + ": the mbarrier at shared " + hex(a) + " was never initialized");
  if (*p != tag(a))
    fault(std::string(what) + ": the mbarrier at shared " + hex(a) +
          " was overwritten by an ordinary store since mbarrier.init");
  return it->second;
}

// The trace of the book's pictures (trace.hpp): the operation, and "done" when it completed the
// barrier's phase.
void traced(const MBar& b, std::uint32_t addr, const char* op, std::uint32_t before,
            std::int64_t value) {
  if (!trace::enabled()) return;
  trace::mbarrier(op, addr, before, value);
  if (b.m.phase() != before) trace::mbarrier("done", addr, b.m.phase(), 0);
}

std::uint32_t load_bytes(const TmaTile& l) {
  return static_cast<std::uint32_t>(model::decode(l.map.data()).box_bytes());
}

// A phase completed (or is about to, after `landed` more bytes) while loads issued on it are
// still in flight: its expect_tx announced fewer bytes than they deliver.
[[noreturn]] void completed_early(std::uint32_t addr, const MBar& b, std::uint32_t phase,
                                  std::uint64_t in_flight, std::size_t loads) {
  fault("the mbarrier at shared " + hex(addr) + " completed phase " + std::to_string(phase) +
        " (its " + std::to_string(b.m.expected()) +
        " arrivals made and its transaction count down to 0) while " + std::to_string(loads) +
        " TMA load(s) tracked by it, " + std::to_string(in_flight) +
        " bytes, had not landed: the phase's expect_tx announced fewer bytes than its loads "
        "deliver, so on the GPU its waiters may read shared memory the loads have not written yet, "
        "and the late bytes complete_tx on the next phase (PTX ISA, mbarrier: phase completion "
        "and tx-count)");
}

// Lands everything that completes on `b` (copies whose completion it tracks), as late as the
// rules allow: when someone waits on it. TMA loads land in the order they were issued, each
// counting its bytes against the current phase (complete_tx), and the phase completes exactly
// when its arrivals are made and its transaction count reaches 0: if that happens before every
// load tracked by it has landed (in the middle of one, or between two), it is reported.
void settle(MBar& b, std::uint32_t addr) {
  const bool landing = !b.loads.empty() || !b.arrivals.empty();
  if (landing) sanitize::acquire(sync(b, 2));
  const std::uint32_t parity = b.m.phase() & 1;
  model::SharedWindow& w = shared_window();
  std::vector<std::uint8_t>& view = async_view();
  std::vector<TmaTile> loads = std::move(b.loads);
  b.loads.clear();
  for (std::size_t i = 0; i < loads.size(); ++i) {
    const TmaTile& l = loads[i];
    const std::uint32_t phase = b.m.phase();
    std::uint64_t rest = 0;  // bytes of this load and the later ones
    for (std::size_t k = i; k < loads.size(); ++k)
      rest += load_bytes(loads[k]);
    const std::int64_t tx = b.m.tx_count();
    if (b.m.pending() == 0 && tx > 0 && load_bytes(l) > tx)  // completes inside this load
      completed_early(addr, b, phase, rest - static_cast<std::uint64_t>(tx), loads.size() - i);
    std::uint32_t bytes = 0;
    {
      const sanitize::Visible load;  // the load's accesses, as the thread that lands it
      bytes = model::tma_load_tile(model::decode(l.map.data()), l.coords, w, l.smem);
    }
    std::memcpy(view.data() + l.smem, w.base + l.smem, bytes);  // written by the async proxy
    b.m.complete_tx(bytes);
    traced(b, addr, "land", phase, bytes);
    if (b.m.phase() != phase && i + 1 < loads.size())  // completed between two loads
      completed_early(addr, b, phase, rest - bytes, loads.size() - i - 1);
  }
  std::vector<CopyArrival> arrivals = std::move(b.arrivals);
  b.arrivals.clear();
  for (const CopyArrival& a : arrivals) {
    land_copies(*a.owner, a.upto);
    if (a.noinc) {
      const std::uint32_t before = b.m.phase();
      b.m.arrive(1);
      traced(b, addr, "arrive", before, 1);
    }
  }
  if (landing) sanitize::release(sync(b, parity));
}

// What a thread or a block leaves in flight when it ends (a fault), as an observer of the
// scheduler's events for the whole program: subscribed when the program starts.
class InFlightChecks final : public events::Observer {
 public:
  InFlightChecks() { events::subscribe(this); }
  void thread_exit() override;
  void block_exit() override;
  void block_end() override { set_block_reduces(0); }
  void block_park(const events::Block& b) override {
    parked_[b.key()] = g_block_reduces;
    set_block_reduces(0);
  }
  void block_resume(const events::Block& b) override {
    const auto it = parked_.find(b.key());
    if (it == parked_.end()) return;
    set_block_reduces(it->second);
    parked_.erase(it);
  }

 private:
  std::map<std::uint64_t, std::size_t> parked_;  // g_block_reduces of the parked blocks
};
InFlightChecks g_in_flight_checks;

void InFlightChecks::thread_exit() {
  ThreadExtra* const t = find_thread_extra();
  if (!t) return;
  const sanitize::IgnoreAccesses bookkeeping;
  // Copies an mbarrier arrival tracks land when that barrier is waited on; any other copy the
  // thread issued and never waited for is a bug (its destination may be read or reused).
  std::size_t tracked_upto = 0;
  for (auto& [addr, b] : block_extra().bars)
    for (const CopyArrival& a : b.arrivals)
      if (a.owner == t) tracked_upto = std::max<std::size_t>(tracked_upto, a.upto);
  std::size_t untracked = 0;
  for (const PendingCopy& c : t->copies)
    if (c.id > tracked_upto) ++untracked;
  if (untracked)
    fault("the thread exits with " + std::to_string(untracked) +
          " cp.async copies it never waited for (no cp.async.wait_group or mbarrier covers them)");
  if (!t->stores.empty())
    fault("the thread exits with " + std::to_string(t->stores.size()) +
          " TMA stores whose shared-memory source it never waited to be read "
          "(cp.async.bulk.wait_group.read)");
  std::size_t unread = 0;
  if (const BlockExtra* b = find_block_extra())
    for (const PendingReduce& r : b->reduces)
      unread += r.issuer == self().linear && !r.read;
  if (unread)
    fault("the thread exits with " + std::to_string(unread) +
          " bulk reduce-adds (cp.reduce.async.bulk) whose shared-memory source it never waited to "
          "be read (cp.async.bulk.wait_group.read)");
  if (!t->mmas.empty())
    fault("the thread exits with " + std::to_string(t->mmas.size()) +
          " wgmma.mma_async results it never waited for (wgmma.wait_group)");
}

void InFlightChecks::block_exit() {
  BlockExtra* const extra = find_block_extra();
  if (!extra) return;
  for (auto& [addr, b] : extra->bars) {
    if (!b.loads.empty())
      fault("the block ends with " + std::to_string(b.loads.size()) +
            " TMA loads into shared memory that nobody waited for (mbarrier at shared " +
            hex(addr) + ")");
    if (!b.arrivals.empty())
      fault("the block ends with cp.async copies whose mbarrier (shared " + hex(addr) +
            ") nobody waited on");
  }
  // Reduce-adds whose source was read but whose adds no full wait covered: they complete by the
  // grid's end at the latest, and the emulator takes that moment (finish_launch).
  for (PendingReduce& r : extra->reduces)
    if (r.read) g_deferred.push_back(Deferred{r.dst, std::move(r.data)});
  extra->reduces.clear();
  set_block_reduces(0);
}

}  // namespace

namespace async {

void cp_async(void* dst, const void* src, std::size_t bytes, std::size_t src_bytes) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  const std::uint32_t a = shared_address(dst, "cp.async (destination)");
  if (bytes != 4 && bytes != 8 && bytes != 16)
    fault("cp.async copies 4, 8 or 16 bytes, not " + std::to_string(bytes));
  if (src_bytes > bytes)
    fault("cp.async: src-size " + std::to_string(src_bytes) + " exceeds cp-size " +
          std::to_string(bytes));
  if (a % bytes != 0 || reinterpret_cast<std::uintptr_t>(src) % bytes != 0)
    fault("cp.async of " + std::to_string(bytes) + " bytes: source or destination is not " +
          std::to_string(bytes) + "-byte aligned (shared " + hex(a) + ")");
  shared_window().check(a, static_cast<std::uint32_t>(bytes), "cp.async (destination)");
  profile::cp_async(__builtin_return_address(0), a, src, bytes, src_bytes);
  // It may write its destination at any time from now until its wait.
  lifetime::check_shared_write(a, static_cast<std::uint32_t>(bytes), "a cp.async",
                               __builtin_return_address(0));
  if (const std::string c = in_flight(block_extra(), a, static_cast<std::uint32_t>(bytes));
      !c.empty())
    fault("a cp.async issued at " + access::describe_pc(__builtin_return_address(0)) + " writes " +
          c);
  if (const std::string r = unread_source(block_extra(), a, static_cast<std::uint32_t>(bytes));
      !r.empty())
    fault("a cp.async issued at " + access::describe_pc(__builtin_return_address(0)) + " writes " +
          r);
  ThreadExtra& t = thread_extra();
  auto* d = static_cast<std::uint8_t*>(dst);
  {
    const sanitize::Visible copy;    // the copy may write its destination from now on
    std::memset(d, kPoison, bytes);  // until it lands
  }
  t.copies.push_back(PendingCopy{
      t.next_copy++, d, static_cast<const std::uint8_t*>(src), static_cast<std::uint32_t>(bytes),
      static_cast<std::uint32_t>(src_bytes), -1, __builtin_return_address(0), self().linear});
  mark_in_flight(t.copies.back());
}

void commit_group() {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  ThreadExtra& t = thread_extra();
  for (PendingCopy& c : t.copies)
    if (c.group < 0) c.group = t.cp_groups;
  ++t.cp_groups;
}

void wait_group(int n) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  ThreadExtra& t = thread_extra();
  const int done_below = t.cp_groups - n;
  std::vector<PendingCopy> keep;
  for (const PendingCopy& c : t.copies) {
    if (c.group >= 0 && c.group < done_below)
      land(c);
    else
      keep.push_back(c);
  }
  t.copies = std::move(keep);
#if defined(FSEMU_TSAN)
  // Copies an mbarrier arrival also tracks may have landed here, before that barrier is waited
  // on: its waiters must see them (the arrival happens once they land).
  for (auto& [addr, b] : block_extra().bars)
    for (const CopyArrival& a : b.arrivals)
      if (a.owner == &t) sanitize::release(sync(b, 2));
#endif
}

void cp_async_mbarrier_arrive(std::uint64_t* bar, bool noinc) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  MBar& b = mbar(bar, "cp.async.mbarrier.arrive");
  ThreadExtra& t = thread_extra();
  b.arrivals.push_back(CopyArrival{&t, t.next_copy - 1, noinc});
  sanitize::release(sync(b, 2));
}

void mbarrier_init(std::uint64_t* bar, std::uint32_t count) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  const std::uint32_t a = shared_address(bar, "mbarrier.init");
  if (a % 8 != 0)
    fault("mbarrier.init: the mbarrier at shared " + hex(a) + " is not 8-byte aligned");
  MBar& b = block_extra().bars[a];
  b = MBar{};
  b.m.init(count);
  *bar = tag(a);
  traced(b, a, "init", 0, count);
}

std::uint64_t mbarrier_arrive(std::uint64_t* bar, std::uint32_t count) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  MBar& b = mbar(bar, "mbarrier.arrive");
  profile::sync(__builtin_return_address(0), profile::Sync::mbarrier_arrive);
  sanitize::release(sync(b, b.m.phase() & 1));
  const std::uint32_t before = b.m.phase();
  const std::uint64_t token = b.m.arrive(count);
  traced(b, shared_address(bar, "mbarrier"), "arrive", before, count);
  return token;
}

std::uint64_t mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  MBar& b = mbar(bar, "mbarrier.arrive.expect_tx");
  profile::sync(__builtin_return_address(0), profile::Sync::mbarrier_arrive);
  sanitize::release(sync(b, b.m.phase() & 1));
  const std::uint32_t before = b.m.phase();
  const std::uint64_t token = b.m.arrive_expect_tx(bytes);
  traced(b, shared_address(bar, "mbarrier"), "arm", before, bytes);
  return token;
}

void mbarrier_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  MBar& b = mbar(bar, "mbarrier.expect_tx");
  const std::uint32_t before = b.m.phase();
  b.m.expect_tx(bytes);
  traced(b, shared_address(bar, "mbarrier"), "expect", before, bytes);
}

namespace {
// `addr` is the mbarrier's shared address, taken when the wait begins: a deadlock between blocks
// describes the waits of parked blocks from outside them, where shared_address() has no block.
std::string waiting_on(std::uint32_t addr, const MBar& b, const std::string& for_what) {
  return "waits on the mbarrier at shared " + hex(addr) + " " + for_what + ": " + b.m.describe() +
         (b.loads.empty() ? "" : ", " + std::to_string(b.loads.size()) + " TMA loads in flight");
}
}  // namespace

bool mbarrier_try_wait_parity(std::uint64_t* bar, std::uint32_t parity) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  MBar& b = mbar(bar, "mbarrier.try_wait.parity");
  profile::sync(__builtin_return_address(0), profile::Sync::mbarrier_wait);
  const std::uint32_t addr = shared_address(bar, "mbarrier");
  wait_until(
      [&b, bar, parity] {
        settle(b, shared_address(bar, "mbarrier"));
        return b.m.test_wait_parity(parity);
      },
      [addr, &b, parity] {
        return waiting_on(addr, b, "for the phase of parity " + std::to_string(parity));
      });
  sanitize::acquire(sync(b, parity));
  traced(b, shared_address(bar, "mbarrier"), "wait", b.m.phase(), parity);
  return true;
}

bool mbarrier_test_wait_parity(std::uint64_t* bar, std::uint32_t parity) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  MBar& b = mbar(bar, "mbarrier.test_wait.parity");
  settle(b, shared_address(bar, "mbarrier"));
  if (b.m.test_wait_parity(parity)) {
    profile::sync(__builtin_return_address(0), profile::Sync::mbarrier_wait);
    sanitize::acquire(sync(b, parity));
    traced(b, shared_address(bar, "mbarrier"), "wait", b.m.phase(), parity);
    return true;
  }
  // Not yet: the caller polls again, so let the others run until the phase can have completed.
  mbarrier_try_wait_parity(bar, parity);
  return false;
}

bool mbarrier_try_wait(std::uint64_t* bar, std::uint64_t token) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  MBar& b = mbar(bar, "mbarrier.try_wait");
  profile::sync(__builtin_return_address(0), profile::Sync::mbarrier_wait);
  const std::uint32_t addr = shared_address(bar, "mbarrier");
  wait_until(
      [&b, bar, token] {
        settle(b, shared_address(bar, "mbarrier"));
        return b.m.test_wait(token);
      },
      [addr, &b] { return waiting_on(addr, b, "for the phase of its arrival token"); });
  sanitize::acquire(sync(b, static_cast<std::uint32_t>(token & 1)));  // the token's phase
  return true;
}

void mbarrier_inval(std::uint64_t* bar) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  mbar(bar, "mbarrier.inval").m.inval();
}

// fence.mbarrier_init.release.cluster orders mbarrier.init before other threads' and the async
// proxy's operations on the object *in other CTAs of the cluster* (PTX ISA, membar/fence:
// fence.mbarrier_init). Without clusters (every launch here is a cluster of one block, and the
// stages launch no clusters) the threads of the block see the initialization through the
// barrier that follows it (__syncthreads: the emulator checks that no mbarrier is used before
// init), and the TMA unit's complete_tx is issued by a thread of the block after it: there is
// nothing left for this fence to order, so it is accepted as a no-op (emu/README.md).
void fence_mbarrier_init() {}

namespace {
// A TMA copy's tile, checked against its map (the decoded map through `map_out`, if given).
TmaTile tma_tile(const void* tensor_map, const std::int32_t* coords, int rank, const void* smem,
                 const char* what, const model::TensorMap** map_out) {
  TmaTile t{};
  t.smem = shared_address(smem, what);
  const model::TensorMap& map = model::decode(tensor_map);
  if (rank != static_cast<int>(map.rank))
    fault("cp.async.bulk.tensor." + std::to_string(rank) + "d with a tensor map of rank " +
          std::to_string(map.rank));
  std::memcpy(t.map.data(), tensor_map, 128);
  std::copy(coords, coords + rank, t.coords);
  t.rank = rank;
  if (map_out) *map_out = &map;
  return t;
}
}  // namespace

void tma_load(void* dst, const void* tensor_map, const std::int32_t* coords, int rank,
              std::uint64_t* bar) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  const model::TensorMap* map = nullptr;
  const TmaTile l =
      tma_tile(tensor_map, coords, rank, dst, "cp.async.bulk.tensor (destination)", &map);
  const std::uint32_t a = l.smem;
  MBar& b = mbar(bar, "cp.async.bulk.tensor (its mbarrier)");
  // The box's bytes hold poison until the load lands.
  const std::uint32_t bytes = static_cast<std::uint32_t>(map->box_bytes());
  shared_window().check(a, bytes, "cp.async.bulk.tensor (destination box)");
  profile::tma(false, bytes);
  // It may write the box at any time from now until its phase completes.
  lifetime::check_shared_write(a, bytes, "a TMA load (cp.async.bulk.tensor)",
                               __builtin_return_address(0));
  if (const std::string r = unread_source(block_extra(), a, bytes); !r.empty())
    fault("a TMA load issued at " + access::describe_pc(__builtin_return_address(0)) + " writes " +
          r);
  {
    const sanitize::Visible load;  // the load may write from now on
    std::memset(shared_window().base + a, kPoison, bytes);
  }
  std::memset(async_view().data() + a, kPoison, bytes);
  b.loads.push_back(l);
  sanitize::release(sync(b, 2));
}

void tma_store(const void* tensor_map, const std::int32_t* coords, int rank, const void* src) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  profile::tma(true, static_cast<std::uint32_t>(model::decode(tensor_map).box_bytes()));
  thread_extra().stores.push_back(
      {tma_tile(tensor_map, coords, rank, src, "cp.async.bulk.tensor (source)", nullptr), -1});
}

void bulk_reduce_add_f32(float* dst, const float* src, std::uint32_t bytes) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  const void* pc = __builtin_return_address(0);
  const auto what = [pc] {
    return "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 at " +
           access::describe_pc(pc);
  };
  const std::uint32_t a = shared_address(src, "cp.reduce.async.bulk (source)");
  if (bytes % 16 != 0)
    fault(what() + ": its size, " + std::to_string(bytes) + " bytes, is not a multiple of 16");
  if (a % 16 != 0 || reinterpret_cast<std::uintptr_t>(dst) % 16 != 0)
    fault(what() + ": source (shared " + hex(a) + ") or destination (" +
          hex(reinterpret_cast<std::uintptr_t>(dst)) + ") is not 16-byte aligned");
  const model::SharedWindow& w = shared_window();
  const auto* d = reinterpret_cast<const std::uint8_t*>(dst);
  if (d < w.base + w.size && w.base < d + bytes)
    fault(what() + ": its destination is in shared memory, not in global memory");
  w.check(a, bytes, "cp.reduce.async.bulk (source)");
  if (bytes == 0) return;
  BlockExtra& b = block_extra();
  if (b.reduce_unread.size() < w.size) b.reduce_unread.resize(w.size, 0);
  for (std::uint32_t x = a; x < a + bytes; ++x)
    ++b.reduce_unread[x];
  b.reduces.push_back(PendingReduce{dst, a, bytes, -1, self().linear, pc, false, {}});
  set_block_reduces(b.reduces.size());
  global_races::note_atomic(dst, bytes, pc);  // other blocks' plain accesses race with it
  watch_accesses();
}

void bulk_commit_group() {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  ThreadExtra& t = thread_extra();
  for (PendingStore& s : t.stores)
    if (s.group < 0) s.group = t.bulk_groups;
  if (BlockExtra* b = find_block_extra())
    for (PendingReduce& r : b->reduces)
      if (r.issuer == self().linear && r.group < 0) r.group = t.bulk_groups;
  ++t.bulk_groups;
}

void bulk_wait_group(int n, bool read_only) {
  const sanitize::IgnoreAccesses bookkeeping;  // sanitize.hpp
  ThreadExtra& t = thread_extra();
  const int done_below = t.bulk_groups - n;
  std::vector<PendingStore> keep;
  for (const PendingStore& s : t.stores) {
    if (s.group >= 0 && s.group < done_below) {
      const model::TensorMap& map = model::decode(s.tile.map.data());
      check_async_proxy_read(s.tile.smem, static_cast<std::uint32_t>(map.box_bytes()),
                             "cp.async.bulk.tensor (store source)");
      const sanitize::Visible store;  // the store reads shared memory, writes global
      model::tma_store_tile(map, s.tile.coords, shared_window(), s.tile.smem);
    } else {
      keep.push_back(s);
    }
  }
  t.stores = std::move(keep);
  BlockExtra* b = find_block_extra();
  if (!b || b->reduces.empty()) return;
  std::vector<PendingReduce> reduces;
  for (PendingReduce& r : b->reduces) {
    if (r.issuer != self().linear || r.group < 0 || r.group >= done_below) {
      reduces.push_back(std::move(r));
      continue;
    }
    if (!r.read) {  // its source is read now, at the latest
      check_async_proxy_read(r.src, r.bytes, "cp.reduce.async.bulk (source)");
      r.data.resize(r.bytes / sizeof(float));
      {
        const sanitize::Visible source;  // the reduce reads shared memory
        std::memcpy(r.data.data(), shared_window().base + r.src, r.bytes);
      }
      for (std::uint32_t x = r.src; x < r.src + r.bytes; ++x)
        --b->reduce_unread[x];
      r.read = true;
    }
    if (read_only)
      reduces.push_back(std::move(r));  // its adds may still be on their way
    else
      add_into(r.dst, r.data);  // complete and visible to this thread
  }
  b->reduces = std::move(reduces);
  set_block_reduces(b->reduces.size());
}

void finish_launch(bool ok) {
  std::vector<Deferred> deferred = std::move(g_deferred);
  g_deferred.clear();
  set_block_reduces(0);
  if (ok)
    for (const Deferred& d : deferred)
      add_into(d.dst, d.data);
}

void fence_proxy_async_shared() {
  model::SharedWindow& w = shared_window();
  std::vector<std::uint8_t>& view = async_view();
  sanitize::Bookkeeping whole_window;
  std::memcpy(view.data(), w.base, std::min<std::size_t>(view.size(), w.size));
}

void check_async_proxy_read(std::uint32_t addr, std::uint32_t bytes, const char* what) {
  model::SharedWindow& w = shared_window();
  w.check(addr, bytes, what);
  const std::vector<std::uint8_t>& view = async_view();
  {
    const sanitize::Visible operand;
    sanitize::read_range(w.base + addr, bytes);  // the async proxy reads the operand
  }
  const sanitize::IgnoreAccesses bookkeeping;  // ... and the emulator its copy of it
  if (std::memcmp(view.data() + addr, w.base + addr, bytes) == 0) return;
  std::uint32_t first = addr;
  while (view[first] == w.base[first])
    ++first;
  fault(std::string(what) + " reads shared memory at " + hex(first) +
        " that ordinary stores changed after the last fence.proxy.async: the async proxy is not "
        "guaranteed to see them (PTX ISA, \"Proxies\" and fence.proxy.async)");
}

}  // namespace async
}  // namespace fsemu
