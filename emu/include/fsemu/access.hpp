// emu/include/fsemu/access.hpp — every load and store of the emulated kernels, as events.
//
// The emulated stages' sources are compiled with GCC's ThreadSanitizer pass
// (-fsanitize=thread, compile only: FSEMU_ACCESS_HOOK_FLAGS in emu/CMakeLists.txt), but no TSan
// runtime is linked: the calls the pass inserts before every memory access (__tsan_read4,
// __tsan_write16, __tsan_atomic32_fetch_add, ...) are defined by the emulator
// (emu/src/access_hooks.cpp) and reach the observers attached here. With no observer attached
// an access costs one call and one branch.
//
// Observers (a checker of what asynchronous operations own, a profiler) see the address, the
// size, read or write, whether it was atomic, and the return address of the hook — inside the
// kernel function that made the access, which describe_pc() turns into a function and a source
// line. They are called from hooks the compiler declares nothrow: an observer must not throw
// (fsemu::report_fault records a failure without unwinding).
//
// Not seen: accesses of code compiled without the pass (the emulator itself, the host test
// code, libraries), memcpy/memset calls (GCC keeps them as calls; the stages use none on shared
// memory), and everything in the sanitizer builds (emu/sanitize.cmake), whose kernels are
// compiled for ASan or the real TSan runtime instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fsemu::access {

struct Access {
  void* addr;
  std::uint32_t size;  // bytes
  bool write;          // a store (or an atomic read-modify-write)
  bool atomic;
  const void* pc;  // return address of the hook: in the function that made the access
};
using Callback = void (*)(void* context, const Access& access);

/// Attaches an observer (at most kMaxObservers at once); returns its handle for detach(), which
/// stays valid whatever is attached or detached in between.
inline constexpr int kMaxObservers = 6;
int attach(Callback fn, void* context);
void detach(int handle);

/// The observer `handle` takes no interest in plain reads of [begin, begin + bytes) until it sets
/// this slot (0 to kSkipSlots - 1) again (bytes 0: none): dispatch() does not call it for them,
/// and the hook tests it inline, without a call. An observer sets it only for reads it would have
/// ignored anyway.
inline constexpr int kSkipSlots = 4;
void skip_reads(int handle, int slot, const void* begin, std::size_t bytes);

/// What else the observer `handle` ignores, so that the hooks need not call it (the same rule as
/// skip_reads: only what it would have returned from at once): every access (atomics too) whose
/// first byte is outside [only, only + only_bytes) or inside [ignore, ignore + ignore_bytes), and
/// every plain read while `plain_reads` is false. At attach(): all memory, nothing ignored, plain
/// reads taken. The race check between blocks ignores the block's shared memory and takes only the
/// span of the allocations (global_races.cpp); the wgmma lifetimes take no reads (lifetime.cpp).
void filter(int handle, const void* only, std::size_t only_bytes, const void* ignore,
            std::size_t ignore_bytes);
void plain_reads(int handle, bool wanted);

/// True once code compiled with the hooks has run its module constructor (__tsan_init): this
/// program's kernels report their accesses.
bool instrumented();

/// A code address as "function (file:line)" — addr2line on the object that holds it, which needs
/// the kernels' line tables (-g1 in FSEMU_ACCESS_HOOK_FLAGS); "function+offset" without them.
std::string describe_pc(const void* pc);
/// The demangled name, without its parameter list, of the function that contains `code` (a
/// function's own address: a kernel), or "" if it is not known.
std::string function_name(const void* code);
/// A demangled function name without its return type ("void " of a template) and parameter list:
/// "void ns::f<int>(int*)" -> "ns::f<int>".
std::string without_signature(std::string demangled);

namespace detail {
struct Observer {
  Callback fn;
  void* context;
  int handle;
  // filter(), plain_reads(), skip_reads(): what the hooks do not hand it.
  std::uintptr_t only_begin = 0, only_bytes = ~std::uintptr_t{0};
  std::uintptr_t ignore_begin = 0, ignore_bytes = 0;
  bool plain_reads = true;
  std::uintptr_t skip_begin[kSkipSlots] = {}, skip_bytes[kSkipSlots] = {};
};
extern Observer g_observers[kMaxObservers];
extern int g_count;  // observers attached: the hooks' only test on the fast path
// The observers that take plain reads (plain_reads), by their index in g_observers, in order: the
// plain read hooks' only test is g_read_count, and they look at these alone.
extern int g_read_count;
extern int g_readers[kMaxObservers];
extern bool g_instrumented;
extern bool g_dispatching;  // an observer runs: its own accesses (if instrumented) are not events
inline bool skips(const Observer& o, void* addr, std::uint32_t size, bool write, bool atomic) {
  const auto x = reinterpret_cast<std::uintptr_t>(addr);
  if (x - o.only_begin >= o.only_bytes) return true;
  if (!write && !atomic) {  // plain reads only: an atomic load is an atomic access
    if (!o.plain_reads) return true;
    // The skipped reads (a kernel's inputs, the most frequent accesses of some stages) before
    // the ignored range.
    for (int i = 0; i < kSkipSlots; ++i)
      if (x - o.skip_begin[i] + size <= o.skip_bytes[i]) return true;
  }
  return x - o.ignore_begin < o.ignore_bytes;
}
// Hands the access to observer `first` (which does not skip it) and to every later one that does
// not skip it. Out of line, so that an access no observer wants costs the hook no call.
void dispatch_from(int first, void* addr, std::uint32_t size, bool write, bool atomic,
                   const void* pc);
inline void dispatch(void* addr, std::uint32_t size, bool write, bool atomic, const void* pc) {
  if (g_dispatching) return;
  for (int i = 0; i < g_count; ++i)
    if (!skips(g_observers[i], addr, size, write, atomic)) {
      dispatch_from(i, addr, size, write, atomic, pc);
      return;
    }
}
// dispatch() of a plain read: only the observers that take plain reads can want it.
inline void dispatch_read(void* addr, std::uint32_t size, const void* pc) {
  if (g_dispatching) return;
  for (int k = 0; k < g_read_count; ++k) {
    const int i = g_readers[k];
    if (!skips(g_observers[i], addr, size, false, false)) {
      dispatch_from(i, addr, size, false, false, pc);
      return;
    }
  }
}
}  // namespace detail

}  // namespace fsemu::access
