// flashsteps/cuda/watchdog.cuh — a bound on the kernels' spin-waits, compiled into test builds.
//
// A thread that waits for a barrier phase that never completes (a wrong parity, an arrival that
// never comes, a copy that was never issued) spins forever: on a GPU host the job hangs until it
// is killed, and says nothing about where. With FLASHSTEPS_WATCHDOG_CYCLES > 0 every spin-wait
// that has lasted longer than that many SM clock cycles prints what it waited on — the barrier,
// its ring slot, the phase parity, the block, warp and thread — and traps, so the launch fails with
// a message the GPU suite shows. flashsteps_add_stage(... WATCHDOG) sets it for the copy of the
// stage that the GPU suite links (about two seconds at H100 clocks: far past any real wait, even
// with other processes sharing the GPU). Runners and benches are built without it: with 0 the
// check compiles to nothing, and the timed kernels are the same code as without this header.
#pragma once

#include <cstdio>

#ifndef FLASHSTEPS_WATCHDOG_CYCLES
#define FLASHSTEPS_WATCHDOG_CYCLES 0
#endif

namespace flashsteps::watchdog {

inline constexpr long long kCycles = FLASHSTEPS_WATCHDOG_CYCLES;

// One spin-wait: construct before the loop, check() in it.
class Spin {
 public:
  __device__ __forceinline__ Spin() {
    if constexpr (kCycles > 0) start_ = clock64();
  }
  // `barrier` names the barrier array (a string literal), `slot` its index in the ring.
  __device__ __forceinline__ void check(const char* barrier, int slot, unsigned parity) const {
    if constexpr (kCycles > 0) {
      if (clock64() - start_ > kCycles) {
        printf(
            "flashsteps watchdog: waited more than %lld cycles on %s[%d] for the phase of "
            "parity %u: block (%u, %u, %u), warp %u, thread %u\n",
            kCycles, barrier, slot, parity, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x / 32u,
            threadIdx.x);
        __trap();
      }
    } else {
      (void)barrier, (void)slot, (void)parity;
    }
  }

 private:
  long long start_ = 0;
};

}  // namespace flashsteps::watchdog
