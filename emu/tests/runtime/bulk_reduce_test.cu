// emu/tests/runtime/bulk_reduce_test.cu — the bulk reduce-add that FlashAttention-3's backward
// uses for its dQ accumulator (issue 42, item 3):
// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32, through CCCL's
// cuda::ptx::cp_reduce_async_bulk, on small kernels of their own compiled as the stages are:
//   1. tiles from several blocks add into one accumulator: exact sums, and the adds are atomic
//      for the check of races between blocks;
//   2. a store into a source the reduce has not read yet (no wait_group.read) is reported;
//   3. after a wait_group.read alone the adds are not guaranteed done: an atomic read sees the
//      old value, a plain load of the destination is reported;
//   4. the full wait_group makes them visible.
// The emulator had no cp_reduce_async_bulk before this: none of these compiled.
#include "flashsteps_catch.hpp"

#include <cuda_runtime.h>
#include <cuda/ptx>

#include <cstdint>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "flashsteps/cuda/launch.cuh"

using Catch::Matchers::ContainsSubstring;

namespace {

using fsemu_test::launch;
using Buffer = fsemu_test::Buffer<float>;

constexpr int kTile = 256;  // floats per tile: 1 KiB
constexpr std::uint32_t kTileBytes = kTile * sizeof(float);

// A tile element: small integers and halves, so every fp32 sum below is exact.
__host__ __device__ float tile_value(int block, int tile, int i) {
  return static_cast<float>((block + 1) * (i % 7 + 1)) + 0.5f * static_cast<float>(tile + 1);
}

// ---- 1. tiles from several blocks into one accumulator
// ------------------------------------------- Each block writes kTiles tiles into one shared
// buffer, one after another, and its thread 0 adds each into acc[(t % 2) * kTile ...] with a bulk
// reduce-add, as FlashAttention-3's dQ writer does: the .read wait before the buffer is rewritten,
// no full wait (the grid's end completes them).
constexpr int kTiles = 3;
__global__ void accumulate_kernel(float* acc) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  for (int t = 0; t < kTiles; ++t) {
    for (int i = static_cast<int>(threadIdx.x); i < kTile; i += static_cast<int>(blockDim.x))
      tile[i] = tile_value(static_cast<int>(blockIdx.x), t, i);
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the reduce reads by the async proxy
    __syncthreads();
    if (threadIdx.x == 0) {
      cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                      cuda::ptx::op_add, acc + (t % 2) * kTile, tile, kTileBytes);
      cuda::ptx::cp_async_bulk_commit_group();
      cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
    }
    __syncthreads();
  }
}

TEST_CASE("bulk reduce-add: tiles of several blocks add into one accumulator, exactly") {
  constexpr int kBlocks = 5;
  Buffer acc(2 * kTile, 3.0f);
  REQUIRE(launch(accumulate_kernel, dim3(kBlocks), 64, kTileBytes, acc.p).empty());
  const std::vector<float> got = acc.read();
  int wrong = 0;
  for (int half = 0; half < 2; ++half)
    for (int i = 0; i < kTile; ++i) {
      double want = 3.0;  // the value before, plus every block's tiles that land on this half
      for (int b = 0; b < kBlocks; ++b)
        for (int t = half; t < kTiles; t += 2)
          want += (b + 1) * (i % 7 + 1) + 0.5 * (t + 1);
      wrong += got[static_cast<std::size_t>(half * kTile + i)] != static_cast<float>(want);
    }
  CHECK(wrong == 0);
}

// The block's threads fill the tile with `value`, then thread 0 adds it into acc and commits.
__device__ void fill_and_add(float* acc, float* tile, float value) {
  for (int i = static_cast<int>(threadIdx.x); i < kTile; i += static_cast<int>(blockDim.x))
    tile[i] = value;
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                    cuda::ptx::op_add, acc, tile, kTileBytes);
    cuda::ptx::cp_async_bulk_commit_group();
  }
}

// A block that reads the accumulator plainly while other blocks reduce-add into it races with
// their adds: the reduce-add is an atomic update for the check of races between blocks.
constexpr int kRacingLoadLine = __LINE__ + 6;  // the load below
__global__ void racing_reader_kernel(float* acc, float* out) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  if (blockIdx.x == 0) {
    // Its atomic first: the race check records an allocation's reads from the launch's first
    // write into it, and this block may run before the others.
    if (threadIdx.x == 0) out[0] = atomicAdd(acc + kTile - 1, 0.0f) + acc[0];
    return;
  }
  fill_and_add(acc, tile, 1.0f);
  if (threadIdx.x == 0) cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});
}

TEST_CASE("bulk reduce-add: another block's plain load of its destination is a race") {
  Buffer acc(kTile, 3.0f), out(1, -1.0f);
  const std::string why = launch(racing_reader_kernel, dim3(3), 64, kTileBytes, acc.p, out.p);
  CHECK_THAT(why, ContainsSubstring("a race between blocks") &&
                      ContainsSubstring("bulk_reduce_test.cu:" + std::to_string(kRacingLoadLine)));
}

// ---- 2. a store into a source not read yet
// ------------------------------------------------------- Thread 0 adds the tile into acc; then
// thread 32 (another warp) overwrites the tile — kHow 0: after a barrier only, before thread 0's
// .read wait (a fault: the reduce may read the new values); 1: after the .read wait and a barrier
// (fine). kHow 2: thread 0 exits without any wait.
template <int kHow>
__global__ void overwrite_kernel(float* acc) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  fill_and_add(acc, tile, 2.0f);
  if (kHow == 2) return;
  __syncthreads();
  if (kHow == 1 && threadIdx.x == 0)
    cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
  if (kHow == 1) __syncthreads();
  if (threadIdx.x == 32) tile[5] = 7.0f;  // kOverwriteLine
  __syncthreads();
  if (kHow == 0 && threadIdx.x == 0)
    cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
}
constexpr int kOverwriteLine = __LINE__ - 5;

TEST_CASE("bulk reduce-add: a store into its source before the .read wait is reported") {
  Buffer acc(kTile, 3.0f);
  const std::string why = launch(overwrite_kernel<0>, dim3(1), 64, kTileBytes, acc.p);
  CHECK_THAT(why,
             ContainsSubstring("a store of 4 bytes at") &&
                 ContainsSubstring("bulk_reduce_test.cu:" + std::to_string(kOverwriteLine)) &&
                 ContainsSubstring("in the source of a cp.reduce.async.bulk.add.f32 of 1024") &&
                 ContainsSubstring("warp 0 lane 0") && ContainsSubstring("not read yet"));
  Buffer acc2(kTile, 3.0f);
  CHECK(launch(overwrite_kernel<1>, dim3(1), 64, kTileBytes, acc2.p).empty());
  CHECK(acc2.read()[5] == 5.0f);  // the tile's 2, not the later 7
  Buffer acc3(kTile, 3.0f);
  CHECK_THAT(launch(overwrite_kernel<2>, dim3(1), 64, kTileBytes, acc3.p),
             ContainsSubstring("never waited to be read (cp.async.bulk.wait_group.read)"));
}

// ---- 3 and 4. what the waits guarantee
// ----------------------------------------------------------- Thread 0 adds the tile (4.0 each)
// into acc, then waits — kHow 0: .read only, 1: the full wait — and reads acc[0]: into out[0] with
// an atomic read (atomicAdd of 0), then into out[1] plainly.
template <int kHow>
__global__ void wait_kernel(float* acc, float* out) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  if (threadIdx.x != 0) return;
  for (int i = 0; i < kTile; ++i)
    tile[i] = 4.0f;
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                  cuda::ptx::op_add, acc, tile, kTileBytes);
  cuda::ptx::cp_async_bulk_commit_group();
  if (kHow == 0) cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
  if (kHow == 1) cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});
  out[0] = atomicAdd(acc, 0.0f);
  out[1] = acc[1];  // kPlainReadLine
}
constexpr int kPlainReadLine = __LINE__ - 2;

TEST_CASE("bulk reduce-add: after wait_group.read alone its adds are not done, nor readable") {
  Buffer acc(kTile, 3.0f), out(2, -1.0f);
  const std::string why = launch(wait_kernel<0>, dim3(1), 32, kTileBytes, acc.p, out.p);
  // The atomic read is not a race with the reduce's atomic adds, and sees them not done yet (the
  // emulator applies them as late as the rules allow: when the grid has run).
  CHECK(out.read()[0] == 3.0f);
  // The plain load races with them, and is reported.
  CHECK_THAT(why, ContainsSubstring("a load of 4 bytes at") &&
                      ContainsSubstring("bulk_reduce_test.cu:" + std::to_string(kPlainReadLine)) &&
                      ContainsSubstring("is still adding into") &&
                      ContainsSubstring("guarantees only that its source was read"));
}

TEST_CASE("bulk reduce-add: the full wait_group makes its adds visible to the issuer") {
  Buffer acc(kTile, 3.0f), out(2, -1.0f);
  REQUIRE(launch(wait_kernel<1>, dim3(1), 32, kTileBytes, acc.p, out.p).empty());
  CHECK(out.read() == std::vector<float>{7.0f, 7.0f});
  CHECK(acc.read() == std::vector<float>(kTile, 7.0f));
}

// Its operands, by the ISA: a size that is a multiple of 16 bytes, 16-byte-aligned addresses.
__global__ void misaligned_kernel(float* acc) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                  cuda::ptx::op_add, acc + 1, tile, 16);
}
constexpr int kMisalignedLine = __LINE__ - 3;

TEST_CASE("bulk reduce-add: a destination not 16-byte aligned is refused") {
  Buffer acc(kTile, 3.0f);
  // The kernel's last call: the fault still names the kernel, not the emulator's fiber.
  CHECK_THAT(launch(misaligned_kernel, dim3(1), 1, kTileBytes, acc.p),
             ContainsSubstring("is not 16-byte aligned") &&
                 ContainsSubstring("inlined into misaligned_kernel (") &&
                 ContainsSubstring("bulk_reduce_test.cu:" + std::to_string(kMisalignedLine)));
}

}  // namespace
