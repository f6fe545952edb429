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
/// and when it is the only observer attached such a read costs the hook a few compares. An
/// observer sets it only for reads it would have ignored anyway.
inline constexpr int kSkipSlots = 4;
void skip_reads(int handle, int slot, const void* begin, std::size_t bytes);

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
  std::uintptr_t skip_begin[kSkipSlots] = {}, skip_bytes[kSkipSlots] = {};  // skip_reads()
};
extern Observer g_observers[kMaxObservers];
extern int g_count;  // observers attached: the hooks' only test on the fast path
extern bool g_instrumented;
extern bool g_dispatching;  // an observer runs: its own accesses (if instrumented) are not events
inline bool skips(const Observer& o, void* addr, std::uint32_t size, bool write, bool atomic) {
  if (write || atomic) return false;  // plain reads only: an atomic load is an atomic access
  const auto x = reinterpret_cast<std::uintptr_t>(addr);
  for (int i = 0; i < kSkipSlots; ++i)
    if (x - o.skip_begin[i] + size <= o.skip_bytes[i]) return true;
  return false;
}
inline void dispatch(void* addr, std::uint32_t size, bool write, bool atomic, const void* pc) {
  if (g_dispatching || (g_count == 1 && skips(g_observers[0], addr, size, write, atomic))) return;
  struct Scope {  // an observer may end the launch by throwing (fsemu::fault)
    Scope() { g_dispatching = true; }
    ~Scope() { g_dispatching = false; }
  } scope;
  const Access a{addr, size, write, atomic, pc};
  for (int i = 0; i < g_count; ++i)
    if (!skips(g_observers[i], addr, size, write, atomic))
      g_observers[i].fn(g_observers[i].context, a);
}
}  // namespace detail

}  // namespace fsemu::access
