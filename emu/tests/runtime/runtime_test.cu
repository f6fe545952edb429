// emu/tests/runtime/runtime_test.cu — the emulator's execution model on small kernels of its own,
// compiled as the stages are (through the device shim) and launched through launch_kernel: the
// CUDA semantics it must keep (barriers, shuffles, votes, named barriers, async copies, block
// order), and the failures it must report instead of hanging or passing (deadlock, divergent
// collectives, a read before the matching wait, a missing dynamic shared-memory opt-in).
#include "flashsteps_catch.hpp"

#include <cuda/pipeline>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "fsemu/access.hpp"
#include "fsemu/events.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

// Writes its thread index into shared memory, synchronises, and reads its neighbour's.
__global__ void neighbour_kernel(int* out) {
  FS_DYNAMIC_SHARED(int, s);
  const int t = static_cast<int>(threadIdx.x);
  s[t] = t * 10;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

// The same without the barrier: thread t reads before thread t+1 (a later warp) has written.
__global__ void missing_barrier_kernel(float* out) {
  FS_DYNAMIC_SHARED(float, s);
  const int t = static_cast<int>(threadIdx.x);
  s[t] = 1.0f;
  out[t] = s[(t + 32) % blockDim.x];
}

__global__ void shuffle_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  int* o = out + 6 * threadIdx.x;
  o[0] = __shfl_sync(0xffffffffu, lane * 3, 5);       // every lane reads lane 5
  o[1] = __shfl_xor_sync(0xffffffffu, lane, 1);       // its pair partner
  o[2] = __shfl_up_sync(0xffffffffu, lane, 2);        // lane - 2, or its own below 2
  o[3] = __shfl_down_sync(0xffffffffu, lane, 4, 16);  // within 16-lane segments
  o[4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  o[5] = __all_sync(0xffffffffu, lane < 32) + 2 * __any_sync(0xffffffffu, lane == 31);
}

__global__ void deadlock_kernel(int* out) {
  if (threadIdx.x < 32) __syncthreads();  // the other warp never arrives: it waits below
  if (threadIdx.x >= 32) flashsteps::ptx::named_barrier_sync(1, 64);
  out[threadIdx.x] = 1;
}

__global__ void divergent_kernel(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x % 2 == 0)
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  else
    __syncwarp();
  out[threadIdx.x] = v;
}

__global__ void mask_kernel(int* out) {
  // Lane 3 is in no mask it passes.
  out[threadIdx.x] = __shfl_sync(0xfffffff7u, static_cast<int>(threadIdx.x), 0);
}

// Producer warp / consumer warp handoff through a named barrier: bar.arrive + bar.sync.
__global__ void named_barrier_kernel(int* out) {
  FS_DYNAMIC_SHARED(int, s);
  if (threadIdx.x < 32) {
    s[threadIdx.x] = 7 + static_cast<int>(threadIdx.x);
    flashsteps::ptx::named_barrier_arrive(2, 64);
  } else {
    flashsteps::ptx::named_barrier_sync(2, 64);
    out[threadIdx.x - 32] = s[threadIdx.x - 32];
  }
}

// cp.async into shared memory; with kWait = false the copy is read before its group is waited.
template <bool kWait>
__global__ void cp_async_kernel(const float* in, float* out) {
  FS_DYNAMIC_SHARED(__align__(16) float, s);
  auto pipe = cuda::make_pipeline();
  const int t = static_cast<int>(threadIdx.x);
  cuda::memcpy_async(s + 4 * t, in + 4 * t, cuda::aligned_size_t<16>(16), pipe);
  pipe.producer_commit();
  if constexpr (kWait) cuda::pipeline_consumer_wait_prior<0>(pipe);
  for (int e = 0; e < 4; ++e)
    out[4 * t + e] = s[4 * t + e];
  if constexpr (!kWait) cuda::pipeline_consumer_wait_prior<0>(pipe);
}

// Each thread stores into shared memory and loads its neighbour's element: 64 stores, 64 loads.
constexpr int kAccessStoreLine = __LINE__ + 5;  // the line of the shared store below
__global__ void access_kernel(int* out) {
  FS_DYNAMIC_SHARED(int, s);
  const int t = static_cast<int>(threadIdx.x);
  __syncthreads();
  s[t] = 3 * t;
  __syncthreads();
  out[t] = s[(t + 1) % blockDim.x];
}

__global__ void order_kernel(int* out, int* counter) {
  if (threadIdx.x == 0) out[blockIdx.x] = (*counter)++;
}

template <class... P, class... A>
std::string launch(void (*k)(P...), int blocks, int threads, std::size_t smem, A... args) {
  const cudaError_t e =
      flashsteps::launch_kernel(k, dim3(static_cast<unsigned>(blocks)),
                                dim3(static_cast<unsigned>(threads)), smem, nullptr, args...);
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

}  // namespace

TEST_CASE("runtime: __syncthreads publishes shared memory across warps, in every block") {
  std::vector<int> out(3 * 96, -1);
  REQUIRE(launch(neighbour_kernel, 3, 96, 96 * sizeof(int), out.data()).empty());
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 96; ++t)
      CHECK(out[b * 96 + t] == ((t + 1) % 96) * 10);
}

TEST_CASE("runtime: a missing barrier reads the poison of a thread that has not run yet") {
  std::vector<float> out(64, 0.0f);
  REQUIRE(launch(missing_barrier_kernel, 1, 64, 64 * sizeof(float), out.data()).empty());
  // Warps start in a drawn order, so one warp reads the other's slots before they are written:
  // those reads are the 0xFF poison (NaN), not 1.
  int nan = 0;
  for (float v : out)
    nan += std::isnan(v) ? 1 : 0;
  CHECK(nan == 32);
}

TEST_CASE("runtime: shuffles and votes follow the CUDA semantics") {
  std::vector<int> out(6 * 32, -1);
  REQUIRE(launch(shuffle_kernel, 1, 32, 0, out.data()).empty());
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3)
    ballot |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    const int* o = &out[6 * l];
    CHECK(o[0] == 15);
    CHECK(o[1] == (l ^ 1));
    CHECK(o[2] == (l >= 2 ? l - 2 : l));
    CHECK(o[3] == (l % 16 < 12 ? l + 4 : l));
    CHECK(static_cast<unsigned>(o[4]) == ballot);
    CHECK(o[5] == 3);
  }
}

TEST_CASE("runtime: bar.arrive / bar.sync hand data from one warp to another") {
  std::vector<int> out(32, -1);
  REQUIRE(launch(named_barrier_kernel, 1, 64, 32 * sizeof(int), out.data()).empty());
  for (int l = 0; l < 32; ++l)
    CHECK(out[l] == 7 + l);
}

TEST_CASE("runtime: a deadlock is reported with what each thread waits on, not a hang") {
  std::vector<int> out(64, 0);
  const std::string why = launch(deadlock_kernel, 1, 64, 0, out.data());
  CHECK_THAT(why, ContainsSubstring("deadlock"));
  CHECK_THAT(why, ContainsSubstring("threads 0..31: __syncthreads() (barrier 0: 32 of 64"));
  CHECK_THAT(why,
             ContainsSubstring("threads 32..63: bar.sync (named barrier) (barrier 1: 32 of 64"));
}

TEST_CASE("runtime: lanes that reach different warp-collective operations are reported") {
  std::vector<int> out(32, 0);
  const std::string why = launch(divergent_kernel, 1, 32, 0, out.data());
  CHECK_THAT(why, ContainsSubstring("diverged"));
  const std::string mask = launch(mask_kernel, 1, 32, 0, out.data());
  CHECK_THAT(mask, ContainsSubstring("does not include the calling lane 3"));
}

TEST_CASE("runtime: a cp.async lands at its wait, and read before it the destination is poison") {
  std::vector<float> in(4 * 32), out(4 * 32, 0.0f);
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<float>(i);
  REQUIRE(launch(cp_async_kernel<true>, 1, 32, in.size() * sizeof(float), in.data(), out.data())
              .empty());
  CHECK(out == in);
  REQUIRE(launch(cp_async_kernel<false>, 1, 32, in.size() * sizeof(float), in.data(), out.data())
              .empty());
  for (float v : out)
    CHECK(std::isnan(v));
}

TEST_CASE("runtime: more than 48 KiB of dynamic shared memory needs the kernel's opt-in") {
  std::vector<int> out(64 * 1024, 0);
  const std::size_t big = 64 * 1024;
  CHECK(launch(neighbour_kernel, 1, 64, big, out.data()) == "invalid argument");
  REQUIRE(flashsteps::allow_dynamic_smem(neighbour_kernel, big) == cudaSuccess);
  CHECK(launch(neighbour_kernel, 1, 64, big, out.data()).empty());
}

TEST_CASE("runtime: blocks run in a drawn order, not the launch order") {
  std::vector<int> out(64, -1);
  int counter = 0;
  REQUIRE(launch(order_kernel, 64, 32, 0, out.data(), &counter).empty());
  const std::set<int> seen(out.begin(), out.end());
  CHECK(seen.size() == 64);  // each block ran once
  int in_order = 0;
  for (int b = 0; b < 64; ++b)
    in_order += out[b] == b ? 1 : 0;
  CHECK(in_order < 64);
}

TEST_CASE("runtime: the kernels' loads and stores reach the access observers, with their line") {
  REQUIRE(fsemu::access::instrumented());  // compiled with FSEMU_ACCESS_HOOK_FLAGS
  struct Seen {
    int shared_reads = 0, shared_writes = 0, other_writes = 0;
    const void* store_pc = nullptr;
  } seen;
  const int handle = fsemu::access::attach(
      [](void* ctx, const fsemu::access::Access& a) {
        if (!fsemu::in_thread()) return;  // the host code around the launch
        auto& s = *static_cast<Seen*>(ctx);
        const fsemu::model::SharedWindow& w = fsemu::shared_window();
        const auto* p = static_cast<const std::uint8_t*>(a.addr);
        const bool shared = p >= w.base && p < w.base + w.size;
        if (shared && a.size == 4 && !a.atomic) {
          (a.write ? s.shared_writes : s.shared_reads) += 1;
          if (a.write) s.store_pc = a.pc;
        } else if (!shared && a.write) {
          ++s.other_writes;
        }
      },
      &seen);
  std::vector<int> out(64, -1);
  const std::string failure = launch(access_kernel, 1, 64, 64 * sizeof(int), out.data());
  fsemu::access::detach(handle);
  REQUIRE(failure.empty());
  CHECK(seen.shared_writes == 64);
  CHECK(seen.shared_reads == 64);
  CHECK(seen.other_writes >= 64);  // out[t], at least
  for (int t = 0; t < 64; ++t)
    CHECK(out[t] == 3 * ((t + 1) % 64));
  CHECK_THAT(fsemu::access::describe_pc(seen.store_pc),
             ContainsSubstring("access_kernel") &&
                 ContainsSubstring("runtime_test.cu:" + std::to_string(kAccessStoreLine)));
}

TEST_CASE("runtime: the scheduler's thread, block and barrier events reach its observers") {
  struct Seen final : fsemu::events::Observer, fsemu::events::SyncObserver {
    int begun = 0, threads = 0, threads_exited = 0, blocks_exited = 0, ended = 0;
    int syncs = 0, arrives = 0, barrier_ids = 0, blocks_converged = 0, warps_converged = 0;
    int releases = 0, acquires = 0;
    void block_begin(const fsemu::events::Block& b) override {
      ++begun;
      threads = b.threads;
    }
    void thread_exit() override { ++threads_exited; }
    void block_exit() override { ++blocks_exited; }
    void block_end() override { ++ended; }
    void barrier(const fsemu::events::Barrier& b) override {
      (b.arrive ? arrives : syncs) += 1;
      barrier_ids |= 1 << b.id;
    }
    void block_converged() override { ++blocks_converged; }
    void warp_converged(int) override { ++warps_converged; }
    void release(const void*) override { ++releases; }
    void acquire(const void*) override { ++acquires; }
  };
  std::vector<int> out(6 * 96, -1);
  {  // bar.arrive by warp 0, bar.sync by warp 1, on barrier 2, in each of two blocks
    Seen seen;
    fsemu::events::subscribe(&seen);
    fsemu::events::subscribe_sync(&seen);
    const std::string failure = launch(named_barrier_kernel, 2, 64, 32 * sizeof(int), out.data());
    fsemu::events::unsubscribe(&seen);
    fsemu::events::unsubscribe_sync(&seen);
    REQUIRE(failure.empty());
    CHECK(seen.begun == 2);
    CHECK(seen.threads == 64);
    CHECK(seen.threads_exited == 2 * 64);
    CHECK(seen.blocks_exited == 2);
    CHECK(seen.ended == 2);
    CHECK(seen.arrives == 2 * 32);
    CHECK(seen.syncs == 2 * 32);
    CHECK(seen.barrier_ids == 1 << 2);
    CHECK(seen.blocks_converged == 0);  // not a __syncthreads
    CHECK(seen.releases >= 2 * 64);     // every arrival releases
    CHECK(seen.acquires >= 2 * 32);     // every bar.sync acquires
  }
  {  // one __syncthreads of three warps: the last to arrive completes it
    Seen seen;
    fsemu::events::subscribe(&seen);
    fsemu::events::subscribe_sync(&seen);
    const std::string failure = launch(neighbour_kernel, 1, 96, 96 * sizeof(int), out.data());
    fsemu::events::unsubscribe(&seen);
    fsemu::events::unsubscribe_sync(&seen);
    REQUIRE(failure.empty());
    CHECK(seen.syncs == 96);
    CHECK(seen.barrier_ids == 1 << 0);
    CHECK(seen.blocks_converged == 1);
  }
  {  // seven full-mask warp collectives (four shuffles, three votes) in one warp
    Seen seen;
    fsemu::events::subscribe(&seen);
    fsemu::events::subscribe_sync(&seen);
    const std::string failure = launch(shuffle_kernel, 1, 32, 0, out.data());
    fsemu::events::unsubscribe(&seen);
    fsemu::events::unsubscribe_sync(&seen);
    REQUIRE(failure.empty());
    CHECK(seen.warps_converged == 7);
  }
  {  // a block that fails does not exit, but it ends
    Seen seen;
    fsemu::events::subscribe(&seen);
    fsemu::events::subscribe_sync(&seen);
    const std::string failure = launch(deadlock_kernel, 1, 64, 0, out.data());
    fsemu::events::unsubscribe(&seen);
    fsemu::events::unsubscribe_sync(&seen);
    CHECK_THAT(failure, ContainsSubstring("deadlock"));
    CHECK(seen.begun == 1);
    CHECK(seen.blocks_exited == 0);
    CHECK(seen.ended == 1);
  }
}
