// flashsteps/cuda/launch.cuh — the one place where a kernel of this project meets the CUDA runtime.
//
// Every stage launches its kernels with launch_kernel() and opts them into large shared memory
// with allow_dynamic_smem(). Both return the runtime's error for the caller's FS_CUDA_CHECK, which
// names the stage's file and line. Keeping the runtime calls here, and nowhere in the stages, is
// what lets a different executor of the same kernels (a CPU emulator, for instance) take over at
// one point instead of in every stage.
//
// Both are plain runtime API calls, not `kernel<<<...>>>(...)`, which only nvcc parses: a file
// that launches kernels defined in another (a stage's launcher.cu, which holds none) then
// compiles with the host C++ compiler alone (stages/flashsteps_add_stage.cmake).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#if defined(FLASHSTEPS_EMULATE)
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
/// configuration and resources are checked at launch; the kernel's own faults surface later): the
/// launch call's own result, as the runtime also records it for cudaGetLastError().
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes,
                          cudaStream_t stream, Args&&... args) {
  // The arguments are converted to the kernel's parameter types once, as a launch copies them.
  std::tuple<Params...> params(std::forward<Args>(args)...);
#if defined(FLASHSTEPS_EMULATE)
  return fsemu::launch(reinterpret_cast<const void*>(kernel), grid, block, smem_bytes, stream,
                       [&params, kernel] { std::apply(kernel, params); });
#else
  // What <<<>>> compiles to: nvcc's host-side stub of the kernel (the function at the address
  // `kernel` holds, which the object of the kernel's file registers with the runtime) takes the
  // arguments as its parameters and launches with one pointer to each (cudaLaunchKernel up to
  // CUDA 12; CUDA 13's stub calls an internal equivalent, crt/host_runtime.h). The runtime copies
  // the values before it returns. A kernel without parameters has an empty array, not read.
  std::array<void*, sizeof...(Params)> arg_ptrs = std::apply(
      [](auto&... param) { return std::array<void*, sizeof...(Params)>{&param...}; }, params);
  return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, arg_ptrs.data(),
                          smem_bytes, stream);
#endif
}

/// Above 48 KiB of dynamic shared memory a kernel must opt in, per function, up to the device's
/// opt-in limit (which the stages check before they launch). (The runtime's C API, which takes
/// the kernel's address as `const void*`: its template overload is declared for nvcc alone.)
template <class... Params>
cudaError_t allow_dynamic_smem(void (*kernel)(Params...), std::size_t smem_bytes) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem_bytes));
}

}  // namespace flashsteps
