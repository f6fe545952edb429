// emu/src/sanitize.hpp — what the sanitizer builds of the emulator (emu/sanitize.cmake) tell
// AddressSanitizer and ThreadSanitizer about the emulator's fibers and its synchronisation.
// Internal to emu/src; every hook compiles to nothing in the ordinary build.
//
//   FSEMU_ASAN  the emulator is compiled with -fsanitize=address (set from __SANITIZE_ADDRESS__):
//               fiber stack switches are announced, the shared-memory window outside the
//               block's dynamic shared memory is poisoned, cudaMalloc allocates exactly the
//               bytes asked for (so the heap redzone starts where the buffer ends).
//   FSEMU_TSAN  set by emu/sanitize.cmake for fsemu_tsan, which is compiled *without*
//               -fsanitize=thread (its own bookkeeping is single-OS-threaded: instrumenting it
//               would only report noise) and linked into programs whose kernels are: each CUDA
//               thread is a TSan fiber, and the emulator's barriers, collectives, mbarriers and
//               copies become happens-before edges (__tsan_release / __tsan_acquire).
#pragma once

#include <cstddef>

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

#if defined(FSEMU_TSAN)
inline void release(const void* sync) {
  __tsan_release(const_cast<void*>(sync));
}
inline void acquire(const void* sync) {
  __tsan_acquire(const_cast<void*>(sync));
}
inline void read_range(const void* p, std::size_t n) {
  __tsan_read_range(const_cast<void*>(p), n);
}
#else
inline void release(const void*) {}
inline void acquire(const void*) {}
inline void read_range(const void*, std::size_t) {}
#endif

/// For the scope of one object (TSan): the running context's reads and writes are not the CUDA
/// thread's (the emulator's bookkeeping copies of shared memory).
class IgnoreAccesses {
 public:
#if defined(FSEMU_TSAN)
  IgnoreAccesses() { __tsan_ignore_thread_begin(); }
  ~IgnoreAccesses() { __tsan_ignore_thread_end(); }
#else
  IgnoreAccesses() {}
#endif
  IgnoreAccesses(const IgnoreAccesses&) = delete;
  IgnoreAccesses& operator=(const IgnoreAccesses&) = delete;
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
