// emu/tests/runtime/device_buffer.hpp — what the runtime tests share: a launch through the stages'
// launch point that returns the failure's text, and device memory filled with one value.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "flashsteps/cuda/launch.cuh"
#include "flashsteps_catch.hpp"

namespace fsemu_test {

/// Launches `k` as the stages do; "" when it ran, else the error's text (the emulator's fault).
template <class... P, class... A>
std::string launch(void (*k)(P...), dim3 grid, int threads, std::size_t smem, A... args) {
  const cudaError_t e = flashsteps::launch_kernel(k, grid, dim3(static_cast<unsigned>(threads)),
                                                  smem, nullptr, args...);
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

/// Device memory of n elements, filled with `value`, freed at scope end.
template <class T>
struct Buffer {
  T* p = nullptr;
  std::size_t n;
  Buffer(std::size_t count, T value) : n(count) {
    REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
    const std::vector<T> host(n, value);
    REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::vector<T> read() const {
    std::vector<T> host(n);
    cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
};

}  // namespace fsemu_test
