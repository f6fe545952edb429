// emu/include/fsemu/async.hpp — asynchronous copies and barriers as the emulator runs them: the
// cp.async groups of a thread, mbarriers, TMA tiled loads and stores, the bulk reduce-add, and the
// proxy fence.
//
// Copies land as late as the rules allow: a cp.async lands when its group is waited for (or when
// the mbarrier its arrival is tied to is waited on), a TMA load when its mbarrier is waited on;
// until then the destination holds poison (0xFF bytes: NaN), so a read before the matching wait
// gives a wrong result. A TMA store (or a wgmma operand) read of shared memory that ordinary
// stores changed after the last fence.proxy.async is a fault. mbarrier waits block the thread
// until the phase completes; a phase that can never complete is reported as a deadlock.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fsemu::async {

// cp.async.{ca,cg}.shared.global [dst], [src], bytes, src_bytes: copies src_bytes and zero-fills
// the rest of `bytes` (src_bytes = 0: all zero, src not read).
void cp_async(void* dst, const void* src, std::size_t bytes, std::size_t src_bytes);
void commit_group();     // cp.async.commit_group
void wait_group(int n);  // cp.async.wait_group n
// cp.async.mbarrier.arrive[.noinc].shared.b64 [bar]
void cp_async_mbarrier_arrive(std::uint64_t* bar, bool noinc);

void mbarrier_init(std::uint64_t* bar, std::uint32_t count);
std::uint64_t mbarrier_arrive(std::uint64_t* bar, std::uint32_t count);
std::uint64_t mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes);
void mbarrier_expect_tx(std::uint64_t* bar, std::uint32_t bytes);
bool mbarrier_try_wait_parity(std::uint64_t* bar, std::uint32_t parity);
bool mbarrier_test_wait_parity(std::uint64_t* bar, std::uint32_t parity);
bool mbarrier_try_wait(std::uint64_t* bar, std::uint64_t token);
void mbarrier_inval(std::uint64_t* bar);
void fence_mbarrier_init();

// cp.async.bulk.tensor.<rank>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
void tma_load(void* dst, const void* tensor_map, const std::int32_t* coords, int rank,
              std::uint64_t* bar);
// cp.async.bulk.tensor.<rank>d.global.shared::cta.tile.bulk_group
void tma_store(const void* tensor_map, const std::int32_t* coords, int rank, const void* src);
// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes: adds `bytes`
// of fp32 values from shared memory into global memory, each element one atomic add. Its source
// is read when a cp.async.bulk.wait_group.read covers its group, and its adds are applied when a
// cp.async.bulk.wait_group (without .read) does; one that only a .read wait covered completes
// when the grid does (finish_launch). In flight: a store into its source before the .read wait,
// and a plain load or store of its destination by its block, are faults.
void bulk_reduce_add_f32(float* dst, const float* src, std::uint32_t bytes);
void bulk_commit_group();
void bulk_wait_group(int n, bool read_only);
// The launch's grid has run (cudart.cpp): the reduce-adds still pending complete now (after a
// failed launch they are dropped).
void finish_launch(bool ok);
void fence_proxy_async_shared();

// For the tensor-core shim: faults if ordinary stores changed [addr, addr + bytes) of shared
// memory after the last fence.proxy.async (an async-proxy read of it would be unordered).
void check_async_proxy_read(std::uint32_t addr, std::uint32_t bytes, const char* what);

}  // namespace fsemu::async
