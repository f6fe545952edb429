// emu/src/global_races.hpp — races between the blocks of one launch on global memory. Internal to
// emu/src.
//
// The blocks of a launch are not ordered with each other (CUDA C++ Programming Guide: blocks
// execute independently, in any order, concurrently or in series), and the emulator runs them one
// after another: a plain read-modify-write of the same global bytes from two blocks (dQ += ...
// where atomicAdd was meant) gives the right sum here and loses updates on the GPU, and no other
// check sees it (ThreadSanitizer orders the blocks: emu/README.md). So, while a launch runs, the
// kernels' accesses to device memory (cudaMalloc's allocations) are kept per 2 bytes: which block
// read, wrote or atomically updated them first, and where. An access is a race when another block
// of the launch made a conflicting one:
//
//   a plain write    against any access of another block (read, write or atomic);
//   a plain read     against another block's plain write or atomic;
//   an atomic        against another block's plain read or write — atomics (atom, red:
//                    atomicAdd) never conflict with each other.
//
// An allocation's reads are recorded from the launch's first write into it (the inputs, which
// every block reads and none writes, cost a lookup and no record). Accesses of one block are the
// sanitizer builds' concern (TSan orders a block's threads by the
// emulator's synchronisation, and knows atomics). Launches are ordered (the stream's order), so
// the record starts afresh with each launch. The first race ends the launch with both accesses,
// their blocks and their source lines.
#pragma once

#include <cstddef>

namespace fsemu::global_races {

/// Device memory (cudart.cpp): what the check covers.
void note_allocation(const void* p, std::size_t bytes);
void note_free(const void* p);

/// A launch of a grid.x * grid.y * grid.z grid begins and ends (cudart.cpp): the kernels' accesses
/// are observed in between.
void launch_begin(unsigned gx, unsigned gy, unsigned gz);
void launch_end();

/// An atomic update of [p, p + bytes) by the running block, made at `pc` by an asynchronous
/// instruction the access hooks do not see (a bulk reduce-add, async.cpp): judged as atomicAdd's.
void note_atomic(void* p, std::size_t bytes, const void* pc);

}  // namespace fsemu::global_races
