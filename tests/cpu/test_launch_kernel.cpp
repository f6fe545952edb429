// tests/cpu/test_launch_kernel.cpp — launch_kernel()'s GPU path without a GPU: what it hands the
// CUDA runtime (flashsteps/cuda/launch.cuh), checked against a stand-in of the runtime's calls.
//
// Every stage launches its kernels through launch_kernel(), which converts the arguments to the
// kernel's parameter types and gives cudaLaunchKernel one pointer to each, as the code nvcc writes
// for `kernel<<<...>>>(...)` does. This binary links no CUDA runtime: it defines cudaLaunchKernel
// and cudaFuncSetAttribute itself, records what they are given, and reads each argument back
// through its pointer by the parameter's type, as the runtime copies it. Host functions stand in
// for the kernels (the runtime takes a kernel by its host-side address). What this cannot show:
// the runtime finding a kernel by that address, which only a GPU run shows.
#define FLASHSTEPS_CATCH_SESSION
#include <cstdint>
#include <cstring>
#include <functional>

#include "flashsteps/cuda/launch.cuh"
#include "flashsteps_catch.hpp"

namespace {

// A 64-byte aligned, 128-byte parameter, as a CUtensorMap of the Hopper stages.
struct alignas(64) TensorMapLike {
  unsigned char bytes[128];
};
// A small struct passed by value, as the stages' Shape parameters.
struct ShapeLike {
  std::int64_t batch;
  std::int32_t heads;
  float scale;
};

// Stand-ins for kernels: only their addresses and parameter types matter.
void kernel_of_six(const float*, std::int64_t, int, TensorMapLike, float, ShapeLike) {}
void kernel_of_none() {}

// What the stand-in runtime was given, and what it answers.
struct Seen {
  int launches = 0;
  const void* func = nullptr;
  dim3 grid, block;
  std::size_t smem = 0;
  cudaStream_t stream = nullptr;
  std::function<void(void**)> read_args;  // reads the arguments while they live
  cudaError_t answer = cudaSuccess;
  int attributes = 0;
  cudaFuncAttribute attribute{};
  int value = 0;
};
Seen seen;

}  // namespace

// The two runtime calls launch.cuh makes, as cuda_runtime_api.h declares them.
cudaError_t CUDARTAPI cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                                       std::size_t smem, cudaStream_t stream) {
  ++seen.launches;
  seen.func = func;
  seen.grid = grid;
  seen.block = block;
  seen.smem = smem;
  seen.stream = stream;
  if (seen.read_args) seen.read_args(args);
  return seen.answer;
}
cudaError_t CUDARTAPI cudaFuncSetAttribute(const void* func, cudaFuncAttribute attribute,
                                           int value) {
  ++seen.attributes;
  seen.func = func;
  seen.attribute = attribute;
  seen.value = value;
  return seen.answer;
}

TEST_CASE(
    "launch_kernel gives cudaLaunchKernel the kernel, the launch and a pointer to each "
    "argument converted to its parameter's type",
    "[launch]") {
  seen = Seen{};
  float data[4] = {1, 2, 3, 4};
  TensorMapLike map;
  for (int i = 0; i < 128; ++i)
    map.bytes[i] = static_cast<unsigned char>(3 * i + 1);
  const ShapeLike shape{7, 12, 0.125f};
  const auto stream = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x5150});
  bool read = false;
  seen.read_args = [&](void** args) {
    REQUIRE(args != nullptr);
    // Each read by the parameter's type: the conversions happened before the call.
    CHECK(*static_cast<const float* const*>(args[0]) == data);
    CHECK(*static_cast<const std::int64_t*>(args[1]) == (std::int64_t{1} << 40));
    CHECK(*static_cast<const int*>(args[2]) == -3);
    CHECK(reinterpret_cast<std::uintptr_t>(args[3]) % alignof(TensorMapLike) == 0);
    CHECK(std::memcmp(static_cast<const TensorMapLike*>(args[3])->bytes, map.bytes, 128) == 0);
    CHECK(*static_cast<const float*>(args[4]) == 2.5f);
    const auto* s = static_cast<const ShapeLike*>(args[5]);
    CHECK(s->batch == 7);
    CHECK(s->heads == 12);
    CHECK(s->scale == 0.125f);
    read = true;
  };
  // float* to const float*, long long to int64_t, a short to int, a double to float.
  const cudaError_t err =
      flashsteps::launch_kernel(kernel_of_six, dim3(5, 6, 7), dim3(128, 2, 1), 49152, stream, data,
                                1LL << 40, static_cast<short>(-3), map, 2.5, shape);
  CHECK(err == cudaSuccess);
  CHECK(read);
  CHECK(seen.launches == 1);
  CHECK(seen.func == reinterpret_cast<const void*>(&kernel_of_six));
  CHECK((seen.grid.x == 5 && seen.grid.y == 6 && seen.grid.z == 7));
  CHECK((seen.block.x == 128 && seen.block.y == 2 && seen.block.z == 1));
  CHECK(seen.smem == 49152);
  CHECK(seen.stream == stream);
}

TEST_CASE("launch_kernel returns the launch call's own result", "[launch]") {
  seen = Seen{};
  seen.answer = cudaErrorLaunchOutOfResources;
  CHECK(flashsteps::launch_kernel(kernel_of_none, dim3(1), dim3(32), 0, nullptr) ==
        cudaErrorLaunchOutOfResources);
  seen.answer = cudaSuccess;  // the earlier error is not returned again
  CHECK(flashsteps::launch_kernel(kernel_of_none, dim3(1), dim3(32), 0, nullptr) == cudaSuccess);
  CHECK(seen.launches == 2);
  CHECK(seen.func == reinterpret_cast<const void*>(&kernel_of_none));
}

TEST_CASE("allow_dynamic_smem opts the kernel in, by its address, to the bytes asked", "[launch]") {
  seen = Seen{};
  CHECK(flashsteps::allow_dynamic_smem(kernel_of_six, 232448) == cudaSuccess);
  CHECK(seen.attributes == 1);
  CHECK(seen.func == reinterpret_cast<const void*>(&kernel_of_six));
  CHECK(seen.attribute == cudaFuncAttributeMaxDynamicSharedMemorySize);
  CHECK(seen.value == 232448);
}

int main(int argc, char** argv) {
  return flashsteps::test::run_catch_session(argc, argv);
}
