// Probe: a wait that never completes, with the project's watchdog on (short bound), must print
// where it waited and trap; the launch then fails with an error instead of hanging.
#define FLASHSTEPS_WATCHDOG_CYCLES 100000000LL
#include <cuda/ptx>
#include <cstdio>
#include <cstdint>
#include "flashsteps/cuda/watchdog.cuh"
__global__ void never(int) {
  __shared__ std::uint64_t bar;
  if (threadIdx.x == 0) cuda::ptx::mbarrier_init(&bar, 2);  // two arrivals expected, none comes
  __syncthreads();
  const flashsteps::watchdog::Spin spin;
  while (!cuda::ptx::mbarrier_try_wait_parity(&bar, 0u)) spin.check("full", 1, 0u);
}
int main() {
  never<<<2, 64>>>(0);
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("launch ended: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess;  // 0 when the watchdog trapped, as it must
}
