// emu/src/lifetime.hpp — how long an asynchronous wgmma owns what it reads and writes, and who
// may know that it has finished. Internal to emu/src.
//
// A wgmma.mma_async may read its shared-memory operands, and writes its accumulators, at any time
// until a wgmma.wait_group covers it (PTX ISA, wgmma.mma_async and wgmma.wait_group). The
// emulator computes it at issue, so without this module a store into those operands or
// accumulators before the wait would go unseen (the operands were already read) or be silently
// dropped (the result overwrites the accumulators at the wait). Here:
//
//  * Every wgmma gets a sequence number (per block, increasing). Its shared-memory operand bytes
//    are marked with it in a per-warpgroup shadow of the window: the B operand as read by all four
//    warps of the warpgroup, the rows of an A operand as read by the warp that owns them (warp w:
//    rows 16w .. 16w+15).
//  * A thread knows, per warp of the block, up to which sequence number that warp's wgmmas have
//    completed: its own warp's from its own wgmma.wait_group, the others' only through the
//    emulator's synchronisation (barriers, warp collectives, mbarrier arrivals and waits: the
//    happens-before events of fsemu/events.hpp, the same release / acquire points that order
//    accesses for ThreadSanitizer, sanitize.hpp), which carries that knowledge as a vector clock
//    carries time.
//  * A write into a marked byte — an ordinary store (seen through fsemu/access.hpp), a TMA load or
//    a cp.async at its issue (it may land at any moment from then on) — by a thread that does not
//    know the wgmma has completed in every warp that reads the byte is a fault: on the GPU it
//    races with the wgmma's read. So is an ordinary store into the accumulator or A-operand
//    registers of a wgmma of the writing thread that is still in flight.
//  * An ordinary store into the accumulator or A-operand registers of a wgmma between the
//    thread's last wgmma.fence and that wgmma's issue is a fault too: the fence orders the
//    thread's register accesses before the wgmmas that use those registers, and a store after it
//    is not ordered (PTX ISA, wgmma.fence). The stores since the fence are kept per thread.
//
// Nothing is tracked in a block until it issues its first wgmma; from then until the block ends
// (the scheduler's event, fsemu/events.hpp) its stores are observed (fsemu/access.hpp).
#pragma once

#include <cstdint>

namespace fsemu {
struct ThreadExtra;
}

namespace fsemu::lifetime {

/// A wgmma of `warpgroup` is issued (called once, by the thread that computes it): returns its
/// sequence number. `pc` is where the kernel issued it.
std::uint32_t begin_wgmma(int warpgroup, int n, bool a_shared, const void* pc);
/// Marks 2 bytes at shared address `addr` as read by wgmma `seq`: by warp `warp` of its
/// warpgroup (0..3), or by all four (warp < 0).
void mark_operand(std::uint32_t seq, std::uint32_t addr, int warp);
/// The running thread has waited for every wgmma of its warpgroup up to `seq`.
void waited(ThreadExtra& t, int warp, std::uint32_t seq);
/// Before thread `t` issues a wgmma with accumulators d[0, regs) and A registers a_regs[0, 4)
/// (null: A in shared memory): faults if one of its stores since its last wgmma.fence wrote one
/// of them (ThreadExtra::fenced_stores; seen only once the block has issued its first wgmma).
void check_fenced_registers(const ThreadExtra& t, const float* d, int regs,
                            const std::uint32_t* a_regs);
/// The running thread writes shared [addr, addr + bytes) (an async copy's destination, from its
/// issue at `pc` on): faults if a wgmma it does not know to be complete may still read a byte.
void check_shared_write(std::uint32_t addr, std::uint32_t bytes, const char* writer,
                        const void* pc);

}  // namespace fsemu::lifetime
