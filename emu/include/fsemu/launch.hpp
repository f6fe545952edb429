// emu/include/fsemu/launch.hpp — a kernel launch under the emulator (flashsteps/cuda/launch.cuh
// calls it where the GPU build writes kernel<<<...>>>).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

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

/// The kernel of every variant a one-case build did not compile (flashsteps/fused_stage.cuh,
/// FS_DEFINE_KERNEL_OF under FSEMU_ONLY_HEAD_DIM): a launch of it ends in a fault that says so.
template <class Fn>
struct NotCompiled;
template <class... Params>
struct NotCompiled<void (*)(Params...)> {
  static void kernel(Params...) {
    fault(
        "this kernel's variant is not compiled in this build, which compiles only the variant "
        "of the one case it runs (FSEMU_ONE_CASE, emu/sanitize.cmake)");
  }
};

}  // namespace fsemu
