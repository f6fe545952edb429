// flashsteps/cuda/launch.cuh — the one place where a kernel of this project meets the CUDA runtime.
//
// Every stage launches its kernels with launch_kernel() and opts them into large shared memory
// with allow_dynamic_smem(). Both return the runtime's error for the caller's FS_CUDA_CHECK, which
// names the stage's file and line. Keeping the runtime calls here, and nowhere in the stages, is
// what lets a different executor of the same kernels (a CPU emulator, for instance) take over at
// one point instead of in every stage.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#if defined(FLASHSTEPS_EMULATE)
#include <tuple>

#include "fsemu/launch.hpp"  // the CPU emulator takes the launch over here (emu/README.md)
#endif

/// FS_DYNAMIC_SHARED(__align__(128) unsigned char, smem): the kernel's dynamic shared memory, on
/// the GPU exactly `extern __shared__ __align__(128) unsigned char smem[]`. The one kernel-source
/// construct the emulator cannot take as written: the host compiler has no `extern __shared__`
/// array, so under FLASHSTEPS_EMULATE `smem` is a pointer to the emulated block's dynamic shared
/// memory instead, placed at the declared alignment (at least 128 bytes) and no more. (Static
/// `__shared__` arrays need no such macro.)
#if defined(FLASHSTEPS_EMULATE)
#define FS_DYNAMIC_SHARED(type, name)               \
  [[maybe_unused]] type name##_fsemu_alignment = 0; \
  type* const name = ::fsemu::DynamicShared {       \
    __alignof__(name##_fsemu_alignment)             \
  }
#else
#define FS_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

namespace flashsteps {

/// kernel<<<grid, block, smem_bytes, stream>>>(args...); returns the launch's error (the
/// configuration and resources are checked at launch; the kernel's own faults surface later).
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes,
                          cudaStream_t stream, Args&&... args) {
#if defined(FLASHSTEPS_EMULATE)
  // The arguments are converted to the kernel's parameter types once, as a launch copies them.
  std::tuple<Params...> params(std::forward<Args>(args)...);
  return fsemu::launch(reinterpret_cast<const void*>(kernel), grid, block, smem_bytes, stream,
                       [&params, kernel] { std::apply(kernel, params); });
#else
  // clang-format off
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  return cudaPeekAtLastError();
#endif
}

/// Above 48 KiB of dynamic shared memory a kernel must opt in, per function, up to the device's
/// opt-in limit (which the stages check before they launch).
template <class... Params>
cudaError_t allow_dynamic_smem(void (*kernel)(Params...), std::size_t smem_bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem_bytes));
}

}  // namespace flashsteps
