// emu/src/state.hpp — what the device shim keeps per thread and per block beyond the scheduler's
// own (ThreadExtra, BlockExtra): copies in flight, mbarriers, wgmma groups, setmaxnreg's pool.
// Created when a thread or block first needs it and dropped when the block ends (state.cpp).
// Internal to emu/src.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "fsemu/model/mbarrier.hpp"
#include "fsemu/scheduler.hpp"

namespace fsemu {

struct PendingCopy {  // one cp.async, not landed yet
  std::uint64_t id;
  std::uint8_t* dst;
  const std::uint8_t* src;
  std::uint32_t bytes, src_bytes;
  int group;       // the cp.async group it belongs to; -1 while the group is open
  const void* pc;  // where the kernel issued it
  int issuer;      // the issuing thread's linear index in the block
};

struct TmaTile {  // one TMA tile copy: the map, the box's coordinates, its shared-memory end
  alignas(64) std::array<std::uint8_t, 128> map;  // a CUtensorMap copy (64-byte aligned, as one)
  std::int32_t coords[5];
  int rank;
  std::uint32_t smem;  // shared address of the box (destination of a load, source of a store)
};

struct PendingStore {  // one TMA store, shared memory not read yet
  TmaTile tile;
  int group;  // bulk async-group; -1 while open
};

struct PendingReduce {  // one cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32, in flight
  float* dst;           // global memory it adds into
  std::uint32_t src;    // shared address of its source
  std::uint32_t bytes;
  int group;                // the issuer's bulk async-group; -1 while open
  int issuer;               // the issuing thread's linear index in the block
  const void* pc;           // where the kernel issued it
  bool read = false;        // its source read: a cp.async.bulk.wait_group.read covered it
  std::vector<float> data;  // the source as read (once `read`)
};

struct PendingMma {  // one wgmma.mma_async: its result, written into d at the wait
  float* d;
  int regs;
  std::vector<float> result;
  int group;                    // wgmma group; -1 while open
  std::uint32_t seq;            // its number in the block (lifetime.hpp)
  const std::uint32_t* a_regs;  // its A operand's registers, or null (A in shared memory)
};

struct FencedStore {  // an ordinary store while a wgmma.fence is open (lifetime.hpp)
  const std::uint8_t* addr;
  std::uint32_t bytes;
  const void* pc;  // where the kernel made it
};

// Per warp of the block: up to which wgmma (sequence number) that warp is known to have waited
// (lifetime.hpp).
using WarpClock = std::array<std::uint32_t, 32>;

struct ThreadExtra {
  std::vector<PendingCopy> copies;
  std::uint64_t next_copy = 1;
  int cp_groups = 0;  // committed cp.async groups so far
  std::vector<PendingStore> stores;
  int bulk_groups = 0;
  std::vector<PendingMma> mmas;
  int wgmma_groups = 0;
  bool wgmma_fenced = false;  // a wgmma.fence since the last wait (registers may have changed)
  // The thread's ordinary stores since that fence, outside shared memory: a wgmma whose
  // accumulator or A registers one of them wrote lacks the fence between the two (lifetime.hpp).
  std::vector<FencedStore> fenced_stores;
  std::uint32_t last_wgmma = 0;  // sequence number of the thread's last wgmma
  WarpClock known{};             // what the thread knows of the warps' completed wgmmas
};

struct CopyArrival {  // cp.async.mbarrier.arrive: lands `owner`'s copies up to `upto`, then arrives
  ThreadExtra* owner;
  std::uint64_t upto;
  bool noinc;
};

struct MBar {
  model::MBarrier m;
  std::vector<TmaTile> loads;  // TMA loads landing when the mbarrier is waited on
  std::vector<CopyArrival> arrivals;
};

struct BlockExtra {
  std::map<std::uint32_t, MBar> bars;  // by shared address
  // The shared memory as the async proxy last saw it (at the last fence.proxy.async, plus what
  // TMA wrote since): an async-proxy read of bytes that differ was not ordered by a fence.
  std::vector<std::uint8_t> async_view;
  // Per byte of the window: 1 + the linear index of the thread whose cp.async into it is in flight
  // (issued, not landed), 0 for none; sized at the block's first cp.async.
  std::vector<std::uint16_t> copy_owner;
  std::uint32_t copies_in_flight = 0;
  // The bulk reduce-adds of the block's threads not complete yet (async.cpp), and per byte of the
  // window how many of them have yet to read it (sized at the block's first one).
  std::vector<PendingReduce> reduces;
  std::vector<std::uint16_t> reduce_unread;
  std::vector<int> maxnreg;   // per warpgroup: its register count (0: the launch's, not set yet)
  std::int64_t reg_pool = 0;  // the block's pool of registers released by setmaxnreg.dec
};

/// The running thread's state and its block's (state.cpp), created on first use.
ThreadExtra& thread_extra();
BlockExtra& block_extra();
/// The same, or null where none was created (the running thread's: null outside a thread).
ThreadExtra* find_thread_extra();
/// Thread `linear` of the running block's state, or null where none was created.
ThreadExtra* find_thread_extra(int linear);
BlockExtra* find_block_extra();

}  // namespace fsemu
