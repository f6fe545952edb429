// emu/shim/cuda_pipeline_primitives.h — the __pipeline_* primitives (cp.async) for the emulator.
#pragma once

#include <cstddef>

#include "fsemu/async.hpp"

// Always inlined, at -O0 too: the emulator names a copy by its caller's line, the kernel's.
[[gnu::always_inline]] inline void __pipeline_memcpy_async(void* dst, const void* src,
                                                           std::size_t size,
                                                           std::size_t zfill = 0) {
  ::fsemu::async::cp_async(dst, src, size, size - zfill);
}
inline void __pipeline_commit() {
  ::fsemu::async::commit_group();
}
inline void __pipeline_wait_prior(std::size_t n) {
  ::fsemu::async::wait_group(static_cast<int>(n));
}
