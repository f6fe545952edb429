// emu/src/events.cpp — the observers of the scheduler's events (fsemu/events.hpp).
#include "fsemu/events.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace fsemu::events {
namespace {

Observer* g_observers[kMaxObservers] = {};
int g_count = 0;

// Hands an event to the observers subscribed when it is published: a copy of the list, so that
// an observer may unsubscribe (or subscribe another) while it handles the event.
template <class F>
void publish(F&& call) {
  if (g_count == 0) return;
  Observer* now[kMaxObservers];
  const int n = g_count;
  std::copy(g_observers, g_observers + n, now);
  for (int i = 0; i < n; ++i)
    call(*now[i]);
}

}  // namespace

void subscribe(Observer* observer) {
  if (g_count == kMaxObservers) {
    std::fprintf(stderr, "fsemu: more than %d event observers subscribed\n", kMaxObservers);
    std::abort();
  }
  g_observers[g_count++] = observer;
}

void unsubscribe(Observer* observer) {
  Observer** end = g_observers + g_count;
  Observer** it = std::find(g_observers, end, observer);
  if (it == end) return;
  std::copy(it + 1, end, it);
  --g_count;
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
  publish([=](Observer& o) { o.release(sync); });
}
void acquire(const void* sync) {
  publish([=](Observer& o) { o.acquire(sync); });
}

}  // namespace fsemu::events
