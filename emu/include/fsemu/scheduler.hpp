// emu/include/fsemu/scheduler.hpp — the execution model of the CPU emulator: blocks, thread
// fibers, the scheduler, barriers and collectives (emu/src/scheduler.cpp).
//
// A launch runs its blocks one after another, in an order drawn from a seed (blocks run in any
// order on the GPU, and a kernel must not depend on one). Inside a block every thread is its own
// fiber (Boost.Context) with its own stack; a thread runs until it has to wait — a barrier, a
// warp-collective operation, an mbarrier phase, a copy — and the scheduler then runs another. A
// wait is a predicate: the scheduler resumes the thread once it holds. When every live thread of
// the block waits and no predicate holds, that is a deadlock: the launch fails with what each
// thread waits on, instead of hanging.
//
// Warp-collective operations (shuffles, votes, __syncwarp, ldmatrix, mma.sync, WMMA) and
// warpgroup-collective ones (wgmma, setmaxnreg) go through collective(): each participant leaves
// a pointer to its operands, the last one to arrive computes the result for all of them, and all
// continue. Participants that reach different operations are reported, as is a mask that leaves
// out the calling lane.
//
// What this proves and what it does not: emu/README.md.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "fsemu/model/fault.hpp"

namespace fsemu {

/// The thread the caller runs as (valid inside a launch only).
struct ThreadInfo {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  int linear;  // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
  int warp;    // linear / 32
  int lane;    // linear % 32
};
const ThreadInfo& self();
/// Whether the caller runs as a thread of a launch (self() and shared_window() are valid).
bool in_thread();

/// The running block's shared memory: the window the instruction models address, and the start
/// of the dynamic shared memory in it: at shared address max(128, the alignment the kernel
/// declares), and no more aligned than that (a kernel that needs more must round up itself).
model::SharedWindow& shared_window();
inline constexpr std::uint32_t kDynamicSmemOffset = 128;
inline constexpr std::uint32_t kMaxDynamicSmemOffset = 1024;
void* dynamic_shared_memory(std::size_t declared_alignment);
/// __cvta_generic_to_shared: the shared address of a pointer into the window (a fault otherwise).
std::uint32_t shared_address(const void* generic, const char* what);
/// The window's byte at a shared address, as a generic pointer.
void* shared_pointer(std::uint32_t addr);

/// Suspends the calling thread until `ready()` holds. `what` describes the wait for a deadlock
/// report ("__syncthreads", "mbarrier at 0x100 for parity 1 (phase 2, 3 of 4 arrivals pending)").
void wait_until(const std::function<bool()>& ready, const std::function<std::string()>& what);

/// Ends the launch with a failure naming the calling thread, its block and `message`.
[[noreturn]] void fault(const std::string& message);
/// The same failure, recorded without unwinding, for callers that must not throw (the access
/// observers, called from hooks the compiler declares nothrow): the launch ends when the thread
/// next waits or exits. The first failure of a block is the one reported.
void report_fault(const std::string& message);

/// bar.sync / bar.arrive on barrier `id` (0..15) for `count` threads (a multiple of 32);
/// count <= 0 means every thread of the block (__syncthreads: threads that have exited count as
/// arrived, as on the GPU).
void bar_sync(int id, int count, const char* what);
void bar_arrive(int id, int count, const char* what);

enum class Scope { warp, warpgroup };
/// The calling thread joins the collective operation `what` of its warp (the lanes in `mask`,
/// which must include the caller) or of its warpgroup (all 128 threads; mask ignored). The last
/// participant to arrive calls fn(args): args[i] is participant i's `my_args` (i = lane, or
/// thread index within the warpgroup), nullptr for those outside the mask.
void collective(Scope scope, std::uint32_t mask, const char* what, void* my_args,
                const std::function<void(void* const* args)>& fn);

template <class Arg, class F>
void collective(Scope scope, std::uint32_t mask, const char* what, Arg& mine, F&& fn) {
  collective(scope, mask, what, static_cast<void*>(&mine),
             [&](void* const* args) { fn(reinterpret_cast<Arg* const*>(args)); });
}

/// Runs body() as every thread of every block of the grid. Returns an empty string on success,
/// else the failure report (also printed to stderr).
struct LaunchConfig {
  dim3 grid;
  dim3 block;
  std::size_t dynamic_smem = 0;
  /// Which blocks run, by linear block id among `blocks` (empty: all of them). The blocks not run
  /// are skipped without a word (the profiler's sample: --profile-blocks).
  std::function<bool(std::uint64_t id, std::uint64_t blocks)> run_block;
};
std::string run_grid(const LaunchConfig& config, const std::function<void()>& body);

/// The seed that orders blocks and warps (FSEMU_SEED in the environment, else a fixed value).
std::uint64_t schedule_seed();

}  // namespace fsemu
