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

namespace flashsteps {

/// kernel<<<grid, block, smem_bytes, stream>>>(args...); returns the launch's error (the
/// configuration and resources are checked at launch; the kernel's own faults surface later).
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes,
                          cudaStream_t stream, Args&&... args) {
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  return cudaPeekAtLastError();
}

/// Above 48 KiB of dynamic shared memory a kernel must opt in, per function, up to the device's
/// opt-in limit (which the stages check before they launch).
template <class... Params>
cudaError_t allow_dynamic_smem(void (*kernel)(Params...), std::size_t smem_bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem_bytes));
}

}  // namespace flashsteps
