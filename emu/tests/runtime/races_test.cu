// emu/tests/runtime/races_test.cu — atomics and the races the emulator reports that its threads'
// one-at-a-time execution would otherwise hide (issue 32), on small kernels of their own compiled
// as the stages are:
//   1. atomicAdd on global and shared memory: exact sums, the ISA's subnormal rule, the profiler's
//      counts;
//   2. races between the blocks of a launch on global memory (global_races.hpp): a plain
//      read-modify-write from several blocks, an atomic against a plain access; atomics together,
//      reads together and disjoint writes are not races;
//   3. a store (or another cp.async) into bytes a cp.async still has in flight (async.cpp).
// Each fault case fails on the emulator before this change: it ran these kernels to the end.
#include "flashsteps_catch.hpp"

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "flashsteps/cuda/launch.cuh"
#include "fsemu/access.hpp"
#include "fsemu/profile.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

using fsemu_test::Buffer;
using fsemu_test::launch;

// ---- 1. atomicAdd ------------------------------------------------------------------------------
// Every thread of every block adds 1 to one global float and to its block's shared float; thread
// 0 then adds the block's shared sum into a second global float, and counts the block in an int.
__global__ void sum_kernel(float* total, float* by_blocks, int* blocks) {
  FS_DYNAMIC_SHARED(__align__(16) float, block_sum);
  if (threadIdx.x == 0) block_sum[0] = 0.0f;
  __syncthreads();
  atomicAdd(total, 1.0f);
  atomicAdd(block_sum, 1.0f);
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(by_blocks, block_sum[0]);
    atomicAdd(blocks, 1);
  }
}

TEST_CASE("atomics: atomicAdd from every thread of every block sums exactly, global and shared") {
  REQUIRE(fsemu::access::instrumented());
  Buffer<float> total(1, 0.0f), by_blocks(1, 0.0f);
  Buffer<int> blocks(1, 0);
  REQUIRE(launch(sum_kernel, dim3(6), 96, 16, total.p, by_blocks.p, blocks.p).empty());
  CHECK(total.read()[0] == 576.0f);
  CHECK(by_blocks.read()[0] == 576.0f);
  CHECK(blocks.read()[0] == 6);
}

// PTX ISA, atom: atom.add.f32 on global memory flushes subnormal inputs and results to
// sign-preserving zero; on shared memory it keeps them.
__global__ void subnormal_kernel(float* global, float* out, float tiny) {
  FS_DYNAMIC_SHARED(__align__(16) float, shared);
  shared[0] = 0.0f;
  atomicAdd(global, tiny);
  atomicAdd(shared, tiny);
  out[0] = shared[0];
}

TEST_CASE("atomics: fp32 atomicAdd flushes subnormals on global memory, not on shared memory") {
  const float tiny = std::ldexp(1.0f, -140);  // subnormal
  REQUIRE(std::fpclassify(tiny) == FP_SUBNORMAL);
  Buffer<float> global(1, 0.0f), out(1, -1.0f);
  REQUIRE(launch(subnormal_kernel, dim3(1), 1, 16, global.p, out.p, tiny).empty());
  CHECK(global.read()[0] == 0.0f);
  CHECK(out.read()[0] == tiny);
}

TEST_CASE("atomics: the profiler counts them per warp instruction, apart from loads and stores") {
  fsemu::profile::enable(fsemu::profile::Options{});
  Buffer<float> total(1, 0.0f), by_blocks(1, 0.0f);
  Buffer<int> blocks(1, 0);
  REQUIRE(launch(sum_kernel, dim3(2), 64, 16, total.p, by_blocks.p, blocks.p).empty());
  const fsemu::profile::Launch& l = fsemu::profile::launches().back();
  auto count = [&](const std::string& name) {
    for (const auto& c : l.counts)
      if (c.name == name) return c.value;
    return -1.0;
  };
  // Per block: two warps add to `total` (2 instructions) and, thread 0 alone, to `by_blocks` and
  // `blocks` (2 more); two warps add to the shared sum.
  CHECK(count("inst.global.atom") == 2 * (2 + 2));
  CHECK(count("inst.shared.atom") == 2 * 2);
  CHECK(count("global.atom.sectors") == 2 * (2 + 2));
}

// ---- 2. races between the blocks of a launch ---------------------------------------------------
// kHow 0: every block adds into sum[0] with a plain +=, the race; 1: with atomicAdd.
constexpr int kPlainAddLine = __LINE__ + 4;  // the += below
template <int kHow>
__global__ void accumulate_kernel(float* sum) {
  if (threadIdx.x != 0) return;
  if (kHow == 0) sum[0] += 1.0f;
  if (kHow == 1) atomicAdd(sum, 1.0f);
}

TEST_CASE("races between blocks: a plain += from several blocks is reported, atomicAdd is not") {
  Buffer<float> sum(1, 0.0f);
  // On the emulator the blocks run one after another, so the plain sum is right (4), and it used
  // to pass; on the GPU the blocks' read-modify-writes interleave and lose updates.
  const std::string why = launch(accumulate_kernel<0>, dim3(4), 32, 0, sum.p);
  CHECK_THAT(why, ContainsSubstring("a race between blocks") &&
                      ContainsSubstring("races_test.cu:" + std::to_string(kPlainAddLine)) &&
                      ContainsSubstring("of the same launch wrote (first at") &&
                      ContainsSubstring("accumulate_kernel<0>") &&
                      ContainsSubstring("needs atomic adds, atomicAdd"));
  Buffer<float> sum2(1, 0.0f);
  CHECK(launch(accumulate_kernel<1>, dim3(4), 32, 0, sum2.p).empty());
  CHECK(sum2.read()[0] == 4.0f);
}

// Every block adds atomically; block 1 then also reads the sum with a plain load (kRead), or
// stores into it (kStore). Whichever order the blocks run in, block 1's plain access and another
// block's atomic meet.
constexpr int kPlainReadLine = __LINE__ + 7;
constexpr int kAtomicLine = kPlainReadLine - 2;
enum class Plain { read, store };
template <Plain kPlain>
__global__ void atomic_then_plain_kernel(float* sum, float* out) {
  atomicAdd(sum, 1.0f);
  if (blockIdx.x != 1) return;
  if (kPlain == Plain::read) out[0] = sum[0];
  if (kPlain == Plain::store) sum[0] = 0.0f;
}

TEST_CASE("races between blocks: an atomic and another block's plain access of its bytes race") {
  // The block order is drawn per grid size: several sizes give block 1 several places in it.
  for (unsigned blocks : {2u, 3u, 4u, 5u}) {
    CAPTURE(blocks);
    Buffer<float> sum(1, 0.0f), out(1, 0.0f);
    const std::string read =
        launch(atomic_then_plain_kernel<Plain::read>, dim3(blocks), 1, 0, sum.p, out.p);
    CHECK_THAT(read, ContainsSubstring("a race between blocks") &&
                         (ContainsSubstring("races_test.cu:" + std::to_string(kPlainReadLine)) ||
                          ContainsSubstring("races_test.cu:" + std::to_string(kAtomicLine))) &&
                         ContainsSubstring("not atomic with respect to another block's atomic"));
    const std::string store =
        launch(atomic_then_plain_kernel<Plain::store>, dim3(blocks), 1, 0, sum.p, out.p);
    CHECK_THAT(store, ContainsSubstring("a race between blocks"));
  }
}

// Block 0 reads flags[1] plainly, then loads flags[0] atomically (the compiler's atomic load, as
// cuda::atomic_ref compiles for the emulator); block 1 stores into flags[0] plainly; the others do
// nothing. Plain reads of an allocation the launch has not written are skipped, but an atomic load
// is an atomic access: it is recorded even then, so the store races it whichever block runs first.
__global__ void atomic_load_then_plain_store_kernel(int* flags, int* out) {
  if (blockIdx.x == 0) out[0] = flags[1] + __atomic_load_n(flags, __ATOMIC_RELAXED);
  if (blockIdx.x == 1) flags[0] = 1;
}

TEST_CASE("races between blocks: an atomic load before the allocation's first write is recorded") {
  for (unsigned blocks : {2u, 3u, 4u, 5u}) {
    CAPTURE(blocks);
    Buffer<int> flags(2, 0), out(1, 0);
    const std::string report =
        launch(atomic_load_then_plain_store_kernel, dim3(blocks), 1, 0, flags.p, out.p);
    CHECK_THAT(report, ContainsSubstring("a race between blocks"));
  }
}

// Not races: every block reads all of `in` (and its own output it wrote), writes its own
// fp16-sized element of `out` (adjacent elements, different blocks), and a later launch reads
// what an earlier one wrote.
__global__ void disjoint_kernel(const float* in, std::uint16_t* out) {
  if (threadIdx.x != 0) return;
  float s = 0.0f;
  for (int i = 0; i < 8; ++i)
    s += in[i];
  out[blockIdx.x] = static_cast<std::uint16_t>(s) + static_cast<std::uint16_t>(blockIdx.x);
  out[blockIdx.x] = static_cast<std::uint16_t>(out[blockIdx.x] + 1);
}

TEST_CASE("races between blocks: shared reads, disjoint writes and later launches are not races") {
  Buffer<float> in(8, 1.0f);
  Buffer<std::uint16_t> out(8, 0);
  REQUIRE(launch(disjoint_kernel, dim3(8), 32, 0, in.p, out.p).empty());
  REQUIRE(launch(disjoint_kernel, dim3(8), 32, 0, in.p, out.p).empty());
  const std::vector<std::uint16_t> o = out.read();
  for (int b = 0; b < 8; ++b)
    CHECK(o[static_cast<std::size_t>(b)] == 8 + b + 1);
}

// ---- 3. a store into a cp.async destination still in flight ------------------------------------
// Thread 0 copies 16 bytes of `src` into shared memory with cp.async. kWho: which thread then
// stores into the copy's second float — thread 32 (another warp) after a barrier, or thread 0
// itself — and kWaitFirst: whether thread 0 has waited for its copy (and a barrier published the
// landing) before that store.
enum class Who { other_warp, issuer };
constexpr int kInFlightStoreLine = __LINE__ + 13;  // the store below
constexpr int kCopyIssueLine = kInFlightStoreLine - 6;
template <Who kWho, bool kWaitFirst>
__global__ void in_flight_kernel(const float* src, float* out) {
  FS_DYNAMIC_SHARED(__align__(16) float, buf);
  const int writer = kWho == Who::issuer ? 0 : 32;
  if (threadIdx.x == 0) {
    __pipeline_memcpy_async(buf, src, 16);
    __pipeline_commit();
    if (kWaitFirst) __pipeline_wait_prior(0);
  }
  __syncthreads();
  if (static_cast<int>(threadIdx.x) == writer) {
    buf[1] = -1.0f;
  }
  __syncthreads();
  if (threadIdx.x == 0 && !kWaitFirst) __pipeline_wait_prior(0);
  __syncthreads();
  if (threadIdx.x == 32) out[0] = buf[1];
}

TEST_CASE("cp.async in flight: a store into its destination before its issuer's wait is a fault") {
  Buffer<float> src(4, 2.0f), out(1, 0.0f);
  // The store after the copy has landed (and a barrier has shown it): no fault, the store wins.
  REQUIRE(launch(in_flight_kernel<Who::other_warp, true>, dim3(1), 64, 16, src.p, out.p).empty());
  CHECK(out.read()[0] == -1.0f);
  // Before the wait: the emulator used to land the copy at the wait, over the store, and pass
  // (out = 2); on the GPU the copy may land before or after the store.
  const std::string other =
      launch(in_flight_kernel<Who::other_warp, false>, dim3(1), 64, 16, src.p, out.p);
  CHECK_THAT(other, ContainsSubstring("thread (32, 0, 0)") &&
                        ContainsSubstring("a store of 4 bytes at") &&
                        ContainsSubstring("in_flight_kernel") &&
                        ContainsSubstring("races_test.cu:" + std::to_string(kInFlightStoreLine)) &&
                        ContainsSubstring("is in the destination of a cp.async of 16 bytes "
                                          "issued at") &&
                        ContainsSubstring("races_test.cu:" + std::to_string(kCopyIssueLine)) &&
                        ContainsSubstring("by thread (0, 0, 0) = warp 0 lane 0, still in flight"));
  // The issuer's own store into its copy's bytes: the same race (copies and stores of a thread
  // are not ordered without the wait).
  const std::string own =
      launch(in_flight_kernel<Who::issuer, false>, dim3(1), 64, 16, src.p, out.p);
  CHECK_THAT(own, ContainsSubstring("thread (0, 0, 0)") &&
                      ContainsSubstring("by this thread, still in flight"));
}

// Two threads copy into the same 16 bytes, the second before the first's wait: the barrier after
// the second copy keeps the first thread from waiting before it under every schedule (without it,
// a schedule that runs thread 0's wait first, FSEMU_SEED=7, landed the first copy in time).
__global__ void copy_over_copy_kernel(const float* src, float* out) {
  FS_DYNAMIC_SHARED(__align__(16) float, buf);
  if (threadIdx.x == 0) __pipeline_memcpy_async(buf, src, 16);
  __syncthreads();
  if (threadIdx.x == 32) __pipeline_memcpy_async(buf, src + 4, 16);
  __syncthreads();
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  out[threadIdx.x] = buf[0];
}

TEST_CASE("cp.async in flight: a cp.async into another's destination before its wait is a fault") {
  Buffer<float> src(8, 1.0f), out(64, 0.0f);
  const std::string why = launch(copy_over_copy_kernel, dim3(1), 64, 16, src.p, out.p);
  CHECK_THAT(why, ContainsSubstring("thread (32, 0, 0)") &&
                      ContainsSubstring("a cp.async issued at") &&
                      ContainsSubstring("by thread (0, 0, 0) = warp 0 lane 0, still in flight"));
}

}  // namespace
