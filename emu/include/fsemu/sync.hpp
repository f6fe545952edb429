// emu/include/fsemu/sync.hpp — atomic loads, stores and read-modify-writes with a memory order,
// as `cuda::atomic_ref` (emu/shim/cuda/atomic) runs them, and the polls that let blocks wait on
// each other (emu/README.md, "Blocks that wait on each other").
//
// A load through these is a poll: when a thread loads a word it loaded before and finds the value
// it found then, it is taken to be spinning on it, and it waits (the scheduler runs its block's
// other threads, or parks the block and runs another) until the word changes; the load then
// returns the new value. Every operation is one atomic access for the access observers
// (fsemu/access.hpp) at the kernel's line: the check of races between blocks lets it meet other
// atomics. Acquire and release orders are happens-before edges through the word's address for the
// sanitizer builds (emu/src/sanitize.hpp). All fibers run on one OS thread, so memory is
// sequentially consistent: the order is recorded, not enforced.
#pragma once

#include <cstdint>

namespace fsemu::sync {

enum class Order { relaxed, acquire, release, acq_rel, seq_cst };
enum class Op { add, exchange, min, max, and_, or_, xor_ };

/// ld{.relaxed,.acquire}: the value of the 4- or 8-byte word at `p` (naturally aligned).
std::uint64_t load(const void* p, std::uint32_t size, Order order);
/// st{.relaxed,.release}.
void store(void* p, std::uint32_t size, std::uint64_t value, Order order);
/// atom.{add,exch,min,max,and,or,xor} on a signed (`is_signed`) or unsigned word: the old value.
std::uint64_t rmw(void* p, std::uint32_t size, bool is_signed, Op op, std::uint64_t value,
                  Order order);
/// atom.cas: the old value; `desired` is written when it equalled `expected`.
std::uint64_t compare_exchange(void* p, std::uint32_t size, std::uint64_t expected,
                               std::uint64_t desired, Order order);
/// __nanosleep: time is not modelled; a poll that sees no change is what makes a thread wait.
void nanosleep(unsigned ns);

}  // namespace fsemu::sync

namespace fsemu {
/// The scheduler's side of a poll (emu/src/scheduler.cpp): the running thread has just loaded
/// `value` (size bytes) from `p`. If that is what its last load of `p` found, the thread waits
/// until the word differs from it (parking its block when no other thread of the block can run)
/// and true is returned: the caller loads again. False otherwise.
bool poll_unchanged(const void* p, std::uint32_t size, std::uint64_t value, const void* pc);
/// The running thread has just released a word (a store or read-modify-write with release
/// semantics): if that lets a parked block run, the running block steps aside (it is parked,
/// runnable) and the drawn order picks which of them runs next, so that the waiter may run before
/// the releasing block's next instruction, as on the GPU.
void yield_after_release();
}  // namespace fsemu
