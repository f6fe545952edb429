// emu/tests/runtime/semaphore_test.cu — blocks that wait on each other through a semaphore in
// global memory, the prerequisite of issue 42's deterministic backward (FlashAttention-3 adds the
// dQ of query tile i in the order of the key tiles j: the block of tile j waits until the tile's
// semaphore says j, adds, and releases j + 1), on small kernels of their own compiled as the stages
// are:
//   1. an fp32 sum added in semaphore order is bit-identical under every schedule, and the same
//      adds without the semaphore are not; the check of races between blocks lets the
//      semaphore's atomics meet, and still reports a plain access that only the semaphore orders;
//      a spin lock's failed compare-and-swap is a poll;
//   2. a wait nothing can satisfy is reported as a deadlock naming the block, the word and its
//      value: a semaphore nobody releases, and a block that waits on one that cannot become
//      resident while it waits (the same wait with every block resident runs);
//   3. issue 42's planted fault: a block that releases the semaphore after only
//      cp.async.bulk.wait_group.read of its bulk reduce-add lets the next block read dQ without
//      its adds; the full wait, then the release, gives the right bits.
// Before this the emulator ran each block to completion: the first test's kernel spun forever in
// the first block that waited (and the shim had no cuda::atomic_ref).
#include "flashsteps_catch.hpp"

#include <cuda_runtime.h>
#include <cuda/atomic>
#include <cuda/ptx>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "flashsteps/cuda/launch.cuh"
#include "fsemu/scheduler.hpp"
#include "fsemu/seed.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

using fsemu_test::launch;
using Semaphore = cuda::atomic_ref<int, cuda::thread_scope_device>;

// The semaphore's two sides, as a stage would write them.
__device__ void wait_for(int* sem, int value) {
  const Semaphore s(*sem);
  while (s.load(cuda::memory_order_acquire) != value)
    __nanosleep(64);
}
__device__ void release(int* sem, int value) {
  Semaphore(*sem).store(value, cuda::memory_order_release);
}

// Restores the seed a test found (FSEMU_SEED's, or the default) when the test, which sets seeds,
// ends.
struct SeedScope {
  const std::uint64_t found = fsemu::schedule_seed();
  ~SeedScope() { fsemu::set_schedule_seed(found); }
};

// ---- 1. an fp32 sum in semaphore order ----------------------------------------------------------
// Block j adds part[j] into *acc; with kOrdered it first waits until *sem == j and then releases
// j + 1. The parts mix 3e7-sized and small values: fp32 rounds each sum, so the result depends on
// the order of the adds.
constexpr int kParts = 12;
float part(int j) {
  return j % 3 == 0 ? 3.0e7f + static_cast<float>(j) : 0.37f * static_cast<float>(j + 1);
}

template <bool kOrdered>
__global__ void ordered_sum_kernel(float* acc, int* sem, const float* parts) {
  const int j = static_cast<int>(blockIdx.x);
  if (threadIdx.x != 0) return;
  if (kOrdered) wait_for(sem, j);
  atomicAdd(acc, parts[j]);
  if (kOrdered) release(sem, j + 1);
}

template <bool kOrdered>
float run_sum(std::uint64_t seed) {
  fsemu::set_schedule_seed(seed);
  std::vector<float> host(kParts);
  for (int j = 0; j < kParts; ++j)
    host[static_cast<std::size_t>(j)] = part(j);
  fsemu_test::Buffer<float> parts(kParts, 0.0f);
  REQUIRE(cudaMemcpy(parts.p, host.data(), sizeof(float) * kParts, cudaMemcpyHostToDevice) ==
          cudaSuccess);
  fsemu_test::Buffer<float> acc(1, 0.25f);
  fsemu_test::Buffer<int> sem(1, 0);
  REQUIRE(launch(ordered_sum_kernel<kOrdered>, dim3(kParts), 64, 0, acc.p, sem.p, parts.p).empty());
  if (kOrdered) CHECK(sem.read()[0] == kParts);
  return acc.read()[0];
}

constexpr std::uint64_t kSeeds[] = {1, 2, 3, 4, 5, 6, 7, 8};

TEST_CASE("semaphore between blocks: an fp32 sum in semaphore order is the same bits every run") {
  const SeedScope restore;
  float want = 0.25f;  // the adds in the order j = 0, 1, ..., on the host in fp32
  for (int j = 0; j < kParts; ++j)
    want += part(j);
  for (std::uint64_t seed : kSeeds) {
    CAPTURE(seed);
    CHECK(run_sum<true>(seed) == want);
  }
}

TEST_CASE("semaphore between blocks: without it the same adds differ across seeds") {
  const SeedScope restore;
  std::set<float> got;
  for (std::uint64_t seed : kSeeds)
    got.insert(run_sum<false>(seed));
  CHECK(got.size() >= 2);  // else the first test could not fail
}

// The check of races between blocks does not take the semaphore's order for plain accesses: a
// plain load of a value other blocks added atomically is reported even after the acquire (a
// stage reads and adds through atomics or the bulk reduce-add there; emu/README.md).
__global__ void plain_after_acquire_kernel(float* acc, int* sem, float* out) {
  const int j = static_cast<int>(blockIdx.x);
  if (threadIdx.x != 0) return;
  wait_for(sem, j);
  out[j] = *acc;  // plain: a race for the check, though the semaphore orders it
  atomicAdd(acc, 1.0f);
  release(sem, j + 1);
}

TEST_CASE("semaphore between blocks: a plain load it orders is still a race for the check") {
  fsemu_test::Buffer<float> acc(1, 0.0f);
  fsemu_test::Buffer<int> sem(1, 0);
  fsemu_test::Buffer<float> out(4, -1.0f);
  CHECK_THAT(launch(plain_after_acquire_kernel, dim3(4), 32, 0, acc.p, sem.p, out.p),
             ContainsSubstring("a race between blocks"));
}

// A spin lock: block 0 takes it and waits for block 1's flag; block 1 sets the flag and takes the
// lock. Under the schedules where block 1 goes on after its release, its compare-and-swap fails
// while block 0 holds the lock: a failed compare-and-swap that finds what the last one found is a
// poll, so block 1 is parked and block 0 runs (a spin on it would never end).
__global__ void spin_lock_kernel(int* lock, int* flag, int* taken) {
  if (threadIdx.x != 0) return;
  const Semaphore l(*lock);
  if (blockIdx.x == 1) release(flag, 1);
  for (int expected = 0; !l.compare_exchange_strong(expected, 1, cuda::memory_order_acquire);
       expected = 0) {
  }
  atomicAdd(taken, 1);
  if (blockIdx.x == 0) wait_for(flag, 1);
  l.store(0, cuda::memory_order_release);
}

TEST_CASE("semaphore between blocks: a spin lock's failed compare-and-swap is a poll") {
  const SeedScope restore;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {  // seed 10 makes block 1 meet the lock held
    CAPTURE(seed);
    fsemu::set_schedule_seed(seed);
    fsemu_test::Buffer<int> lock(1, 0), flag(1, 0), taken(1, 0);
    CHECK(launch(spin_lock_kernel, dim3(2), 32, 0, lock.p, flag.p, taken.p).empty());
    CHECK(taken.read()[0] == 2);
    CHECK(lock.read()[0] == 0);
  }
}

// ---- 2. waits that nothing satisfies ------------------------------------------------------------
__global__ void unreleased_kernel(int* sem) {
  if (threadIdx.x == 0) wait_for(sem, 5);  // nobody releases it
}

TEST_CASE("semaphore between blocks: a semaphore nobody releases is a deadlock, reported") {
  fsemu_test::Buffer<int> sem(1, 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string why = launch(unreleased_kernel, dim3(3), 32, 0, sem.p);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK_THAT(why, ContainsSubstring("deadlock between blocks") &&
                      ContainsSubstring("block (0, 0, 0):") &&
                      ContainsSubstring("block (2, 0, 0):") &&
                      ContainsSubstring("polls the 4 bytes at 0x") &&
                      ContainsSubstring("semaphore_test.cu") &&
                      ContainsSubstring("which hold 0 and have not changed"));
  CHECK(seconds < 5.0);
}

// Thread 0 polls a semaphore nobody releases before it arrives on an mbarrier that thread 32 (warp
// 1) waits on, as a stage's semaphore writer and its math warps do (09h): the report of the
// deadlock between blocks describes the parked blocks' mbarrier waits from outside them. Before
// the mbarrier's address was taken at the wait, describing it aborted the program ("a device
// function was called outside a kernel launch").
__global__ void unreleased_beside_mbarrier_kernel(int* sem) {
  FS_DYNAMIC_SHARED(__align__(8) std::uint64_t, bar);
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(bar, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    wait_for(sem, 5);  // nobody releases it
    cuda::ptx::mbarrier_arrive(bar);
  } else if (threadIdx.x == 32) {
    while (!cuda::ptx::mbarrier_try_wait_parity(bar, 0)) {
    }
  }
}

TEST_CASE("semaphore between blocks: a deadlock with mbarrier waits beside the poll, reported") {
  fsemu_test::Buffer<int> sem(1, 0);
  const std::string why =
      launch(unreleased_beside_mbarrier_kernel, dim3(2), 64, sizeof(std::uint64_t), sem.p);
  CHECK_THAT(why, ContainsSubstring("deadlock between blocks") &&
                      ContainsSubstring("block (1, 0, 0):") &&
                      ContainsSubstring("polls the 4 bytes at 0x") &&
                      ContainsSubstring("waits on the mbarrier at shared 0x"));
}

// Every block but the last waits until the last block sets the flag. 100 KiB of dynamic shared
// memory per block: two blocks per SM of the emulated device's 8, so 16 resident at once.
constexpr std::size_t kBigSmem = 100 * 1024;
__global__ void wait_on_last_kernel(int* flag) {
  FS_DYNAMIC_SHARED(__align__(16) float, smem);
  smem[threadIdx.x] = 1.0f;
  if (threadIdx.x != 0) return;
  if (blockIdx.x + 1 == gridDim.x)
    release(flag, 1);
  else
    wait_for(flag, 1);
}

TEST_CASE("semaphore between blocks: waiting on a block that cannot become resident deadlocks") {
  REQUIRE(cudaFuncSetAttribute(wait_on_last_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kBigSmem)) == cudaSuccess);
  const SeedScope restore;
  for (std::uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    fsemu::set_schedule_seed(seed);
    // 16 blocks are resident at once: the last is, and releases the others.
    fsemu_test::Buffer<int> fits(1, 0);
    CHECK(launch(wait_on_last_kernel, dim3(16), 32, kBigSmem, fits.p).empty());
    CHECK(fits.read()[0] == 1);
    // 17: the first 16 wait, and the 17th is dispatched only when one of them ends.
    fsemu_test::Buffer<int> beyond(1, 0);
    CHECK_THAT(launch(wait_on_last_kernel, dim3(17), 32, kBigSmem, beyond.p),
               ContainsSubstring("deadlock between blocks") &&
                   ContainsSubstring("16 resident, at most 16 at once: 2 per SM") &&
                   ContainsSubstring("from linear index 16 on, cannot be dispatched") &&
                   ContainsSubstring("block (15, 0, 0):"));
  }
}

// ---- 3. issue 42's fault: a release after the .read wait of a bulk reduce-add -------------------
// Block j waits for the semaphore, reads dQ (an atomic load: what the next adds build on), adds
// its tile into dQ with a bulk reduce-add and releases j + 1: after the full wait_group (right),
// or after wait_group.read alone (the fault: the source has been read, the adds may not have
// reached global memory; flash-attention issue #2244).
constexpr int kTile = 32;
constexpr std::uint32_t kTileBytes = kTile * sizeof(float);

template <bool kFullWait>
__global__ void chained_reduce_kernel(float* dq, int* sem, float* seen) {
  FS_DYNAMIC_SHARED(__align__(128) float, tile);
  const int j = static_cast<int>(blockIdx.x);
  for (int i = static_cast<int>(threadIdx.x); i < kTile; i += static_cast<int>(blockDim.x))
    tile[i] = static_cast<float>(j + 1);
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
  __syncthreads();
  if (threadIdx.x != 0) return;
  wait_for(sem, j);
  seen[j] =
      cuda::atomic_ref<float, cuda::thread_scope_device>(dq[0]).load(cuda::memory_order_relaxed);
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                  cuda::ptx::op_add, dq, tile, kTileBytes);
  cuda::ptx::cp_async_bulk_commit_group();
  if (kFullWait)
    cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});
  else
    cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
  release(sem, j + 1);
}

template <bool kFullWait>
std::vector<float> run_chain(int blocks) {
  fsemu_test::Buffer<float> dq(kTile, 0.5f);
  fsemu_test::Buffer<int> sem(1, 0);
  fsemu_test::Buffer<float> seen(static_cast<std::size_t>(blocks), -1.0f);
  REQUIRE(launch(chained_reduce_kernel<kFullWait>, dim3(static_cast<unsigned>(blocks)), 32,
                 kTileBytes, dq.p, sem.p, seen.p)
              .empty());
  return seen.read();
}

TEST_CASE("semaphore between blocks: released after the full wait, the next block sees the adds") {
  constexpr int kBlocks = 5;
  std::vector<float> want(kBlocks);  // 0.5 plus the tiles of blocks 0 .. j-1
  for (int j = 0; j < kBlocks; ++j)
    want[static_cast<std::size_t>(j)] = 0.5f + static_cast<float>(j * (j + 1) / 2);
  CHECK(run_chain<true>(kBlocks) == want);
}

TEST_CASE("semaphore between blocks: released after wait_group.read, the adds are not there yet") {
  constexpr int kBlocks = 5;
  const std::vector<float> seen = run_chain<false>(kBlocks);
  CHECK(seen[0] == 0.5f);
  CHECK(seen[kBlocks - 1] == 0.5f);  // none of the four blocks before it: not 10.5
}

}  // namespace
