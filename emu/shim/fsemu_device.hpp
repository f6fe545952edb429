// emu/shim/fsemu_device.hpp — force-included (-include) first into every translation unit the
// emulation build compiles from a .cu file with the host compiler. It gives the kernels the
// device environment they were written for: the CUDA keywords, the built-in variables, and the
// intrinsics, executed by the emulator (fsemu/device.hpp). The CUDA headers (cuda_runtime.h,
// cuda_fp16.h, ...) are the toolkit's own: they keep a keyword defined before them.
// The other headers of emu/shim/ stand in for <mma.h>, <cuda/pipeline>, <cuda/barrier>,
// <cuda/ptx> and <cuda_pipeline_primitives.h>, which only nvcc can compile for the device.
#pragma once

#define FLASHSTEPS_EMULATE 1

#define __global__
#define __device__
#define __host__
// A static `__shared__` array becomes a function-local static: one object that every thread of
// the running block sees (blocks run one at a time). It lives outside the emulated shared-memory
// window, so it is neither poisoned between blocks nor bounds-checked; the stages keep their
// large tiles in dynamic shared memory (FS_DYNAMIC_SHARED), which is both.
#define __shared__ static
#define __constant__
#define __managed__
#define __grid_constant__
#define __launch_bounds__(...)

#include <cuda_runtime.h>

#include "fsemu/device.hpp"
