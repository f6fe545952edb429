// emu/src/trace.hpp — an event trace of an emulated run, for the book's pictures. Internal to
// emu/src.
//
// Off unless the environment names a file: FSEMU_TRACE=<path> (the runner's `--emulate`, the
// emulated suites, anything linking fsemu). Then the run appends tab-separated lines to it:
//
//   alloc  <id> <bytes>                                          every cudaMalloc, ids from 0
//   launch <n> <kernel> <grid x y z> <block x y z>                every launch, n from 0
//   mbar   <seq> <launch> <block> <thread> <op> <addr> <phase> <value>
//          an mbarrier operation as the emulator's one OS thread makes it (seq: its place in
//          that order, over the whole run; block: the linear block id; addr: the barrier's
//          shared address). op and value: init (arrival count), arrive (count), arm
//          (arrive.expect_tx: bytes), expect (expect_tx: bytes), land (a TMA load's complete_tx
//          at the wait that lands it: bytes), done (the phase completed; phase is the new one),
//          wait (try_wait/test_wait returned true: the parity waited for). phase: the barrier's
//          phase before the operation (after it, for done).
//   bar    <seq> <launch> <block> <thread> <id> <count> <sync|arrive>
//          lane 0 of a warp arrives at barrier id (bar.sync, bar.arrive; __syncthreads is id 0
//          with the block's count), before it waits; seq counts with the mbar lines
//   use    <launch> <r|w|a> <alloc> <first byte> <end byte>      the launch's reads, plain
//          writes and atomic updates of device memory, merged to 64-byte lines
//   touch  <launch> <block> <warp> <w|a> <alloc> <line> <order>  per block and warp, each 64-byte
//          line it wrote (or updated atomically) and the order of its first such access among
//          the block's (0, 1, ...)
//
// What it is for: book/pictures.py draws 07b's mbarrier timeline, 08c's turns, the backward's
// data flow (09a), tile walk (09b) and warp ownership (09c) from it. The order of mbar lines is
// one legal interleaving (the emulator's), not the GPU's timing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fsemu::trace {

bool enabled();
void note_allocation(const void* p, std::size_t bytes);
void launch_begin(const void* kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz);
void launch_end();
/// An mbarrier operation of the running thread (async.cpp).
void mbarrier(const char* op, std::uint32_t addr, std::uint32_t phase, std::int64_t value);

}  // namespace fsemu::trace
