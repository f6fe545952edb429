// emu/src/sanitize.hpp — what the sanitizer builds of the emulator (emu/sanitize.cmake) tell
// AddressSanitizer and ThreadSanitizer about the emulator's fibers and its synchronisation.
// Internal to emu/src; every hook compiles to nothing in the ordinary build, but release() and
// acquire(), which are also the scheduler's happens-before events (fsemu/events.hpp: the wgmma
// lifetimes observe them, lifetime.hpp) in every build.
//
//   FSEMU_ASAN  the emulator is compiled with -fsanitize=address (set from __SANITIZE_ADDRESS__):
//               fiber stack switches are announced, the shared-memory window outside the
//               block's dynamic shared memory is poisoned, cudaMalloc allocates exactly the
//               bytes asked for (so the heap redzone starts where the buffer ends).
//   FSEMU_TSAN  set by emu/sanitize.cmake for fsemu_tsan, whose runtime, copies and cudart are
//               compiled *without* -fsanitize=thread (their bookkeeping is single-OS-threaded:
//               instrumenting it would only report noise), its instruction models and
//               warp-collective intrinsics (src/model/, device.cpp) with it, and which is linked
//               into programs whose kernels are: each CUDA thread is a TSan fiber named after it,
//               the fibers' switches do not order anything, and the emulator's barriers,
//               collectives, mbarriers and copy landings become happens-before edges
//               (__tsan_release / __tsan_acquire). The emulator's own accesses made through
//               malloc / memcpy on behalf of a thread are ignored (IgnoreAccesses), but for those
//               the hardware would make (Visible: a copy landing, a TMA tile, an operand read).
#pragma once

#include <cstddef>

#include "fsemu/events.hpp"

#if defined(__SANITIZE_ADDRESS__) && !defined(FSEMU_ASAN)
#define FSEMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(FSEMU_TSAN)
#define FSEMU_TSAN 1
#endif

#if defined(FSEMU_TSAN)
#include <sanitizer/tsan_interface.h>
extern "C" {
// Exported by the TSan runtime (tsan_interface.h of compiler-rt), not in the public header.
void __tsan_ignore_thread_begin();
void __tsan_ignore_thread_end();
void __tsan_read_range(void* addr, unsigned long size);
void __tsan_write_range(void* addr, unsigned long size);
}
#endif

namespace fsemu::sanitize {

// The emulator's synchronisation points: a release by the running thread into the object `sync`
// (any address that names it) happens before every later acquire of it. Every build publishes
// them to the event observers (fsemu/events.hpp); the TSan build tells TSan too.
inline void release(const void* sync) {
  events::release(sync);
#if defined(FSEMU_TSAN)
  __tsan_release(const_cast<void*>(sync));
#endif
}
inline void acquire(const void* sync) {
  events::acquire(sync);
#if defined(FSEMU_TSAN)
  __tsan_acquire(const_cast<void*>(sync));
#endif
}
#if defined(FSEMU_TSAN)
inline void read_range(const void* p, std::size_t n) {
  __tsan_read_range(const_cast<void*>(p), n);
}
#else
inline void read_range(const void*, std::size_t) {}
#endif

/// TSan: the emulator's own reads and writes (the bookkeeping of copies, barriers and wgmma
/// groups, which different CUDA threads touch through malloc and memcpy) are not the kernel's:
/// each entry point from the device shim that keeps such state ignores them for its scope, and
/// marks what the hardware would do for the thread (a copy landing, a TMA store reading shared
/// memory) Visible. Scopes nest, per CUDA thread (emu/src/scheduler.cpp keeps the depth).
#if defined(FSEMU_TSAN)
void ignore_begin();
void ignore_end();
#endif
class IgnoreAccesses {
 public:
#if defined(FSEMU_TSAN)
  IgnoreAccesses() {
    ignore_begin();
  }
  ~IgnoreAccesses() {
    ignore_end();
  }
#else
  IgnoreAccesses() {}
#endif
  IgnoreAccesses(const IgnoreAccesses&) = delete;
  IgnoreAccesses& operator=(const IgnoreAccesses&) = delete;
};
class Visible {
 public:
#if defined(FSEMU_TSAN)
  Visible();
  ~Visible();

 private:
  int saved_;
#else
  Visible() {}
#endif
 public:
  Visible(const Visible&) = delete;
  Visible& operator=(const Visible&) = delete;
};

/// For the scope of one object: the emulator's own access to the block's shared-memory window
/// (the async proxy's copy of it), not an access by the running CUDA thread. ASan: the window's
/// poisoned margin below the dynamic shared memory is readable; TSan: the accesses are ignored.
class Bookkeeping {
 public:
#if defined(FSEMU_ASAN) || defined(FSEMU_TSAN)
  Bookkeeping();
  ~Bookkeeping();
#else
  Bookkeeping() {}
#endif
  Bookkeeping(const Bookkeeping&) = delete;
  Bookkeeping& operator=(const Bookkeeping&) = delete;
};

}  // namespace fsemu::sanitize
