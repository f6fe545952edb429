// emu/src/events.cpp — the observers of the scheduler's events (fsemu/events.hpp).
#include "fsemu/events.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace fsemu::events {
namespace {

template <class O>
struct List {
  O* observers[kMaxObservers] = {};
  int count = 0;

  void add(O* observer) {
    if (count == kMaxObservers) {
      std::fprintf(stderr, "fsemu: more than %d event observers subscribed\n", kMaxObservers);
      std::abort();
    }
    observers[count++] = observer;
  }
  void remove(O* observer) {
    O** end = observers + count;
    O** it = std::find(observers, end, observer);
    if (it == end) return;
    std::copy(it + 1, end, it);
    --count;
  }
  // Hands an event to the observers subscribed when it is published: a copy of the list, so that
  // an observer may unsubscribe (or subscribe another) while it handles the event.
  template <class F>
  void publish(F&& call) const {
    if (count == 0) return;
    O* now[kMaxObservers];
    const int n = count;
    std::copy(observers, observers + n, now);
    for (int i = 0; i < n; ++i)
      call(*now[i]);
  }
};
List<Observer> g_observers;
List<SyncObserver> g_sync_observers;

template <class F>
void publish(F&& call) {
  g_observers.publish(call);
}

}  // namespace

void subscribe(Observer* observer) {
  g_observers.add(observer);
}
void unsubscribe(Observer* observer) {
  g_observers.remove(observer);
}
void subscribe_sync(SyncObserver* observer) {
  g_sync_observers.add(observer);
}
void unsubscribe_sync(SyncObserver* observer) {
  g_sync_observers.remove(observer);
}

void block_begin(const Block& block) {
  publish([&](Observer& o) { o.block_begin(block); });
}
void thread_exit() {
  publish([](Observer& o) { o.thread_exit(); });
}
void block_exit() {
  publish([](Observer& o) { o.block_exit(); });
}
void block_end() {
  publish([](Observer& o) { o.block_end(); });
}
void block_park(const Block& block) {
  publish([&](Observer& o) { o.block_park(block); });
}
void block_resume(const Block& block) {
  publish([&](Observer& o) { o.block_resume(block); });
}
void barrier(const Barrier& barrier) {
  publish([&](Observer& o) { o.barrier(barrier); });
}
void block_converged() {
  publish([](Observer& o) { o.block_converged(); });
}
void warp_converged(int warp) {
  publish([=](Observer& o) { o.warp_converged(warp); });
}
void release(const void* sync) {
  g_sync_observers.publish([=](SyncObserver& o) { o.release(sync); });
}
void acquire(const void* sync) {
  g_sync_observers.publish([=](SyncObserver& o) { o.acquire(sync); });
}

}  // namespace fsemu::events
