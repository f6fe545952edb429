// emu/include/fsemu/launch.hpp — a kernel launch under the emulator (flashsteps/cuda/launch.cuh
// calls it where the GPU build writes kernel<<<...>>>).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

#include "fsemu/scheduler.hpp"

namespace fsemu {

/// Checks the configuration as the runtime does (threads per block, dynamic shared memory against
/// the kernel's opt-in from cudaFuncSetAttribute and the device limit), then runs every thread of
/// every block (run_grid). Launches run at once, in stream order trivially. Returns
/// cudaErrorLaunchFailure after a fault or deadlock; the report is on stderr and in
/// cudaGetErrorString's text until the next launch.
cudaError_t launch(const void* kernel, dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                   const std::function<void()>& body);

/// FS_DYNAMIC_SHARED's emulated form: converts to a pointer to the dynamic shared memory.
struct DynamicShared {
  std::size_t alignment;
  template <class T>
  operator T*() const {
    return static_cast<T*>(dynamic_shared_memory(alignment));
  }
};

}  // namespace fsemu
