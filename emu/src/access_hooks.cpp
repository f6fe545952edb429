// emu/src/access_hooks.cpp — the entry points GCC's ThreadSanitizer pass calls from the emulated
// kernels (fsemu/access.hpp), defined here instead of by the TSan runtime: each hands the access
// to the attached observers; the atomics do what they name (with sequentially consistent order,
// at least as strong as any order the caller asked for).
//
// Not part of fsemu_tsan (emu/sanitize.cmake): that build links the real TSan runtime, which
// defines the same symbols.
#include <cstdint>

#include "fsemu/access.hpp"

using fsemu::access::detail::dispatch;
using fsemu::access::detail::dispatch_read;
using fsemu::access::detail::g_count;
using fsemu::access::detail::g_read_count;

#define FSEMU_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FSEMU_PC __builtin_return_address(0)

extern "C" {

void __tsan_init() {
  fsemu::access::detail::g_instrumented = true;
}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}

// Plain reads go only to the observers that take them (access::plain_reads).
#define FSEMU_READ(size)                                                \
  void __tsan_read##size(void* p) {                                     \
    if (FSEMU_UNLIKELY(g_read_count)) dispatch_read(p, size, FSEMU_PC); \
  }                                                                     \
  void __tsan_unaligned_read##size(void* p) {                           \
    if (FSEMU_UNLIKELY(g_read_count)) dispatch_read(p, size, FSEMU_PC); \
  }                                                                     \
  void __tsan_volatile_read##size(void* p) {                            \
    if (FSEMU_UNLIKELY(g_read_count)) dispatch_read(p, size, FSEMU_PC); \
  }
#define FSEMU_WRITE(size)                                                  \
  void __tsan_write##size(void* p) {                                       \
    if (FSEMU_UNLIKELY(g_count)) dispatch(p, size, true, false, FSEMU_PC); \
  }                                                                        \
  void __tsan_unaligned_write##size(void* p) {                             \
    if (FSEMU_UNLIKELY(g_count)) dispatch(p, size, true, false, FSEMU_PC); \
  }                                                                        \
  void __tsan_volatile_write##size(void* p) {                              \
    if (FSEMU_UNLIKELY(g_count)) dispatch(p, size, true, false, FSEMU_PC); \
  }
FSEMU_READ(1)
FSEMU_READ(2)
FSEMU_READ(4)
FSEMU_READ(8)
FSEMU_READ(16)
FSEMU_WRITE(1)
FSEMU_WRITE(2)
FSEMU_WRITE(4)
FSEMU_WRITE(8)
FSEMU_WRITE(16)
#undef FSEMU_READ
#undef FSEMU_WRITE

void __tsan_read_range(void* p, unsigned long size) {
  if (FSEMU_UNLIKELY(g_read_count)) dispatch_read(p, static_cast<std::uint32_t>(size), FSEMU_PC);
}
void __tsan_write_range(void* p, unsigned long size) {
  if (FSEMU_UNLIKELY(g_count)) dispatch(p, static_cast<std::uint32_t>(size), true, false, FSEMU_PC);
}
void __tsan_vptr_read(void** p) {
  if (FSEMU_UNLIKELY(g_read_count)) dispatch_read(p, sizeof(void*), FSEMU_PC);
}
void __tsan_vptr_update(void** p, void*) {
  if (FSEMU_UNLIKELY(g_count)) dispatch(p, sizeof(void*), true, false, FSEMU_PC);
}

// Atomics: TSan's signatures (its memory-order argument is ignored: seq_cst is always allowed).
#define FSEMU_ATOMIC(bits, T)                                                                   \
  T __tsan_atomic##bits##_load(const volatile T* a, int) {                                      \
    if (FSEMU_UNLIKELY(g_count)) dispatch(const_cast<T*>(a), sizeof(T), false, true, FSEMU_PC); \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                \
  }                                                                                             \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                   \
    if (FSEMU_UNLIKELY(g_count)) dispatch(const_cast<T*>(a), sizeof(T), true, true, FSEMU_PC);  \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                   \
  }                                                                                             \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                   \
    if (FSEMU_UNLIKELY(g_count)) dispatch(const_cast<T*>(a), sizeof(T), true, true, FSEMU_PC);  \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                         \
  }                                                                                             \
  FSEMU_RMW(bits, T, fetch_add, __atomic_fetch_add)                                             \
  FSEMU_RMW(bits, T, fetch_sub, __atomic_fetch_sub)                                             \
  FSEMU_RMW(bits, T, fetch_and, __atomic_fetch_and)                                             \
  FSEMU_RMW(bits, T, fetch_or, __atomic_fetch_or)                                               \
  FSEMU_RMW(bits, T, fetch_xor, __atomic_fetch_xor)                                             \
  FSEMU_RMW(bits, T, fetch_nand, __atomic_fetch_nand)                                           \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {       \
    if (FSEMU_UNLIKELY(g_count)) dispatch(const_cast<T*>(a), sizeof(T), true, true, FSEMU_PC);  \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
  }                                                                                             \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {         \
    if (FSEMU_UNLIKELY(g_count)) dispatch(const_cast<T*>(a), sizeof(T), true, true, FSEMU_PC);  \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);      \
  }                                                                                             \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {             \
    if (FSEMU_UNLIKELY(g_count)) dispatch(const_cast<T*>(a), sizeof(T), true, true, FSEMU_PC);  \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
    return c;                                                                                   \
  }
#define FSEMU_RMW(bits, T, name, builtin)                                                      \
  T __tsan_atomic##bits##_##name(volatile T* a, T v, int) {                                    \
    if (FSEMU_UNLIKELY(g_count)) dispatch(const_cast<T*>(a), sizeof(T), true, true, FSEMU_PC); \
    return builtin(a, v, __ATOMIC_SEQ_CST);                                                    \
  }
FSEMU_ATOMIC(8, std::uint8_t)
FSEMU_ATOMIC(16, std::uint16_t)
FSEMU_ATOMIC(32, std::uint32_t)
FSEMU_ATOMIC(64, std::uint64_t)
#undef FSEMU_RMW
#undef FSEMU_ATOMIC

void __tsan_atomic_thread_fence(int) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
void __tsan_atomic_signal_fence(int) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

}  // extern "C"
