// emu/include/fsemu/events.hpp — what the scheduler does, as events: a block begins and ends, a
// thread exits, a thread arrives at a barrier, a warp or the whole block converges, and the
// happens-before edges of the emulator's synchronisation.
//
// The scheduler (emu/src/scheduler.cpp) publishes them and knows nothing of who listens, as the
// access hooks publish loads and stores (fsemu/access.hpp). The models that need them subscribe
// an Observer:
//
//   emu/src/profile.cpp   the counters, from profile::enable() on: blocks, barriers, convergence
//   emu/src/async.cpp     the checks that a thread or a block leaves nothing in flight, for the
//                         whole program (subscribed when the program starts)
//   emu/src/state.cpp     the device shim's per-thread and per-block state, dropped at block end
//   emu/src/lifetime.cpp  the wgmma lifetimes, from a block's first wgmma to its end: the
//                         happens-before edges carry what each thread knows has completed
//
// Observers are called in the order they subscribed, on the emulator's one OS thread. A
// subscription or unsubscription made while an event is being handed out (an observer that
// unsubscribes at block_end) takes effect from the next event. An observer may end the launch
// with fsemu::fault() where its event says so.
#pragma once

#include <vector_types.h>

#include <cstdint>

namespace fsemu::events {

/// The block that begins: its index and its number of threads.
struct Block {
  uint3 idx;
  int threads;
  /// A key that names the block in its launch (for what an observer keeps while it is parked).
  std::uint64_t key() const {
    return std::uint64_t{idx.x} | std::uint64_t{idx.y} << 31 | std::uint64_t{idx.z} << 47;
  }
};

/// A thread arrives at a barrier (bar.sync, bar.arrive, __syncthreads).
struct Barrier {
  const void* site;  // the kernel's code address of the call (the emulator's return address)
  int id;            // 0..15
  int count;         // the threads the barrier waits for (the block's for __syncthreads)
  bool all;          // every thread of the block (__syncthreads: a barrier without a count)
  bool arrive;       // bar.arrive: the thread arrives without waiting
};

class Observer {
 public:
  virtual ~Observer() = default;

  /// A block is about to run (its shared memory poisoned, none of its threads started).
  virtual void block_begin(const Block&) {}
  /// The running thread has returned from the kernel (called as that thread; may fault()).
  virtual void thread_exit() {}
  /// Every thread of the block has exited and the block has not failed (may fault()).
  virtual void block_exit() {}
  /// The block is over, failed or not, and its threads are gone: per-block state goes.
  virtual void block_end() {}
  /// The running block is set aside with its threads waiting on global memory (a poll that saw
  /// no change, fsemu/sync.hpp), and other blocks run before it resumes: an observer keeps what
  /// it holds for the running block aside, under the block's index, until block_resume of the
  /// same block, and holds nothing for a running block in between (the next event is another
  /// block's block_begin or block_resume).
  virtual void block_park(const Block&) {}
  virtual void block_resume(const Block&) {}

  /// The running thread arrives at a barrier, before it waits on it.
  virtual void barrier(const Barrier&) {}
  /// The last thread of the block to arrive at a __syncthreads has completed it: every thread of
  /// the block has reached the same synchronisation (not published when the last arrival is
  /// a thread's exit).
  virtual void block_converged() {}
  /// Every lane of warp `warp` joined one warp-collective operation with the full mask, which has
  /// just been computed.
  virtual void warp_converged(int /*warp*/) {}
};

/// Happens-before: what the running thread did so far is released into the synchronisation
/// object `sync` (any address that names it: a barrier's generation, an mbarrier's phase, a
/// copy's landing), and acquired from it by every thread that later acquires `sync`. Published
/// through emu/src/sanitize.hpp, which tells ThreadSanitizer the same. The most frequent events
/// (every barrier arrival and warp collective makes two), so they go only to the observers that
/// subscribe for them (subscribe_sync), apart from the others.
class SyncObserver {
 public:
  virtual ~SyncObserver() = default;
  virtual void release(const void* sync) = 0;
  virtual void acquire(const void* sync) = 0;
};

/// Subscribes an observer (at most kMaxObservers at once); unsubscribing one that is not
/// subscribed does nothing.
inline constexpr int kMaxObservers = 8;
void subscribe(Observer* observer);
void unsubscribe(Observer* observer);
void subscribe_sync(SyncObserver* observer);
void unsubscribe_sync(SyncObserver* observer);

/// Publishing: each hands its event to every observer subscribed.
void block_begin(const Block& block);
void thread_exit();
void block_exit();
void block_end();
void block_park(const Block& block);
void block_resume(const Block& block);
void barrier(const Barrier& barrier);
void block_converged();
void warp_converged(int warp);
void release(const void* sync);  // to the SyncObservers
void acquire(const void* sync);

}  // namespace fsemu::events
