// emu/tests/sanitize/planted.cu — planted bugs that the sanitizer builds of the emulator must
// report (emu/sanitize.cmake): kernels compiled through the device shim like a stage's, with
// AddressSanitizer or ThreadSanitizer, and a main() that runs the one its argument names.
//
//   race        warp 1 reads shared memory that warp 0 wrote, with no barrier between: TSan
//   synced      the same with __syncthreads() between: no report (the barrier orders them)
//   shared-oob  a thread reads one float past the block's dynamic shared memory: ASan
//   global-oob  a thread reads one float past a cudaMalloc'd buffer: ASan
//   atomic-race warp 0 adds into a shared float with atomicAdd while warp 1 reads it with a plain
//               load, no barrier between: TSan (a plain access racing an atomic)
//   atomics     both warps add into it with atomicAdd, then a barrier: no report (atomics do not
//               race with each other)
//   parked      two blocks taking turns through a word in global memory, block 1's turn first:
//               block 0 is parked polling it (cuda::atomic_ref acquire loads) while block 1 runs,
//               after its other threads have exited, and block 1's threads take their fibers'
//               stacks: no report (neither those stacks nor the scheduler's look at the polled
//               word is an access of the kernel's threads)
#include <cuda_runtime.h>
#include <cuda/atomic>

#include <cstdio>
#include <cstring>
#include <vector>

#include "flashsteps/cuda/launch.cuh"

namespace {

constexpr int kWarp = 32;

__global__ void warp_handoff(float* out, bool synced) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  if (threadIdx.x < kWarp) tile[threadIdx.x] = static_cast<float>(threadIdx.x);  // warp 0 writes
  if (synced) __syncthreads();
  if (threadIdx.x >= kWarp) out[threadIdx.x - kWarp] = tile[threadIdx.x - kWarp];  // warp 1 reads
}

__global__ void shared_past_end(float* out, int shift) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  tile[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x + shift];  // shift 1: the last thread reads past the end
}

__global__ void global_past_end(const float* in, float* out, int shift) {
  out[threadIdx.x] = in[threadIdx.x + shift];  // shift 1: the last thread reads past the end
}

// plain_read: warp 1 reads the sum with a plain load instead of adding to it.
__global__ void shared_sum(float* out, bool plain_read) {
  FS_DYNAMIC_SHARED(__align__(128) float, sum);
  if (threadIdx.x == 0) sum[0] = 0.0f;
  __syncthreads();
  if (threadIdx.x < kWarp || !plain_read) atomicAdd(sum, 1.0f);               // warp 0 (both warps)
  if (threadIdx.x >= kWarp && plain_read) out[threadIdx.x - kWarp] = sum[0];  // warp 1 reads
  __syncthreads();
  if (threadIdx.x == 0) out[0] = sum[0];
}

// Block b waits for its turn (block 1 first), writes, and hands the turn on; every other thread
// works on its own stack and exits.
__global__ void take_turns(int* turn, float* out) {
  volatile float scratch[8];  // stack memory the thread writes (the next block's reuse it)
  for (int i = 0; i < 8; ++i)
    scratch[i] = static_cast<float>(threadIdx.x + i);
  const int mine = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  if (threadIdx.x == 0) {
    cuda::atomic_ref<int, cuda::thread_scope_device> t(*turn);
    while (t.load(cuda::memory_order_acquire) != mine)
      __nanosleep(32);
    out[blockIdx.x] = scratch[0] + static_cast<float>(mine);
    t.store(mine + 1, cuda::memory_order_release);
  }
}

int check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 0;
  std::fprintf(stderr, "planted: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* which = argc > 1 ? argv[1] : "";
  constexpr int n = 64;
  float *in = nullptr, *out = nullptr;
  if (check(cudaMalloc(&in, n * sizeof(float)), "cudaMalloc") ||
      check(cudaMalloc(&out, n * sizeof(float)), "cudaMalloc"))
    return 1;
  const std::vector<float> ones(n, 1.0f);
  cudaMemcpy(in, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaError_t e = cudaErrorInvalidValue;
  if (std::strcmp(which, "race") == 0 || std::strcmp(which, "synced") == 0)
    e = flashsteps::launch_kernel(warp_handoff, dim3(1), dim3(2 * kWarp), kWarp * sizeof(float),
                                  nullptr, out, std::strcmp(which, "synced") == 0);
  else if (std::strcmp(which, "shared-oob") == 0)
    e = flashsteps::launch_kernel(shared_past_end, dim3(1), dim3(n), n * sizeof(float), nullptr,
                                  out, 1);
  else if (std::strcmp(which, "global-oob") == 0)
    e = flashsteps::launch_kernel(global_past_end, dim3(1), dim3(n), 0, nullptr, in, out, 1);
  else if (std::strcmp(which, "atomic-race") == 0 || std::strcmp(which, "atomics") == 0)
    e = flashsteps::launch_kernel(shared_sum, dim3(1), dim3(2 * kWarp), sizeof(float), nullptr, out,
                                  std::strcmp(which, "atomic-race") == 0);
  else if (std::strcmp(which, "parked") == 0) {
    int* turn = nullptr;
    if (check(cudaMalloc(&turn, sizeof(int)), "cudaMalloc")) return 1;
    const int zero = 0;
    cudaMemcpy(turn, &zero, sizeof(int), cudaMemcpyHostToDevice);
    e = flashsteps::launch_kernel(take_turns, dim3(2), dim3(2 * kWarp), 0, nullptr, turn, out);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    cudaFree(turn);
  } else
    std::fprintf(stderr, "usage: %s race|synced|shared-oob|global-oob|atomic-race|atomics|parked\n",
                 argv[0]);
  if (check(e, which)) return 1;
  std::vector<float> host(n);
  cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(in);
  cudaFree(out);
  std::printf("planted %s: ran to the end (out[0] = %g)\n", which, static_cast<double>(host[0]));
  return 0;
}
