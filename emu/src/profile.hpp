// emu/src/profile.hpp — the emulator's calls into the counters of fsemu/profile.hpp. Each is one
// call at the point where the emulator runs the instruction; all return at once when counting is
// off. Internal to emu/src.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fsemu::profile {

extern bool g_on;  // enable() was called

// The launch (cudart.cpp). The blocks, barriers and convergences come from the scheduler's
// events (fsemu/events.hpp), which the counters observe from enable() on.
void launch_begin(const void* kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz, std::size_t smem);
void launch_end(bool ok);
// Whether block `linear_id` of `blocks` runs: the sample of Options::sample_blocks (the launch's
// LaunchConfig::run_block).
bool run_block(std::uint64_t linear_id, std::uint64_t blocks);

// Device memory, to tell global accesses from the thread's own stack (cudart.cpp).
void note_allocation(const void* p, std::size_t bytes);
void note_free(const void* p);

// Warp-collective instructions: called once per warp instruction, by the participant that
// computes it (device.cpp).
enum class Op { shfl, vote, syncwarp, mma_m16n8k16, wmma_mma };
void warp_op(Op op);
/// ldmatrix .x{count}: addrs[l] is lane l's row address (the lanes of each 8-address phase).
void ldmatrix(int count, const std::uint32_t* addrs);
/// WMMA load/store of a 16x16 tile at shared or global pointer p, leading dimension ldm elements
/// of elem_bytes each (see profile.cpp for the SASS each is counted as).
void wmma_move(bool store, const void* p, unsigned ldm, int elem_bytes, bool col_major);
/// wgmma.mma_async m64n{n}k16: shared operand bytes read through the async proxy.
void wgmma(int n, bool a_from_shared);

// Per-thread instructions, grouped into warp instructions by (warp, site, occurrence); the
// barriers' come from the scheduler's events, the mbarriers' from async.cpp.
void cp_async(const void* site, std::uint32_t smem_addr, const void* src, std::size_t bytes,
              std::size_t src_bytes);
enum class Sync { bar_sync, bar_named_sync, bar_arrive, mbarrier_wait, mbarrier_arrive };
void sync(const void* site, Sync kind);
// TMA: issued by one thread; bytes moved by the box.
void tma(bool store, std::uint32_t bytes);
/// An ordinary load or store, or an atomic (atom/red: counted apart), by the calling thread (the
/// access hooks' observer).
void access(const void* site, const void* addr, std::size_t size, bool store, bool atomic);

/// The rule every shared-memory count uses (emu/README.md, Counting): the wavefronts a warp-wide
/// access of `width` bytes per lane needs (lane l at addr[l], size[l] bytes, lanes in mask), and
/// the conflict-free minimum (one per phase with an active lane).
struct Wavefronts {
  std::uint64_t total = 0, ideal = 0;
};
Wavefronts shared_wavefronts(const std::uint32_t* addr, const std::uint8_t* size,
                             std::uint32_t mask, int width);

}  // namespace fsemu::profile
