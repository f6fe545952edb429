// emu/tests/runtime/lifetime_test.cu — asynchronous operations as intervals (issue 20), on small
// kernels of their own compiled as the stages are: a wgmma's shared-memory operands stay locked
// and its accumulator and A registers stay its own until a wgmma.wait_group covers it; an
// mbarrier phase completes exactly when its arrivals and transaction bytes are met; setmaxnreg
// starts from the kernel's register count and draws on the block's register pool; and the
// driver's grid.x limit.
#include "flashsteps_catch.hpp"

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>
#include <cuda/ptx>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>  // getpid

#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda/ptx.cuh"
#include "fsemu/access.hpp"
#include "fsemu/model/tma.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

namespace ptx = flashsteps::ptx;

template <class... P, class... A>
std::string launch(void (*k)(P...), dim3 grid, int threads, std::size_t smem, A... args) {
  const cudaError_t e = flashsteps::launch_kernel(k, grid, dim3(static_cast<unsigned>(threads)),
                                                  smem, nullptr, args...);
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

// The window's dynamic part rounded up to 1024 bytes (128B-swizzled wgmma operands).
__device__ unsigned char* aligned_smem(unsigned char* raw) {
  return raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u);
}
constexpr std::size_t kLockSmem = 4096 + 1024;

// ---- 1. a wgmma's shared-memory operands, until its wait ----------------------------------------
// Warpgroup 0 issues one wgmma m64n64k16 with B (16 x 64 fp16, MN-major, 2 KiB) in shared memory,
// and tells warpgroup 1 through an mbarrier that B may be overwritten; thread 128 then writes into
// B. kArriveFirst: the arrival comes before the wgmma.wait_group (the race), else after it.
// kHow: 0 an ordinary store, 1 a cp.async.
enum class Writer { store, cp_async };
constexpr int kLockStoreLine = __LINE__ + 22;  // the store into B below
template <bool kArriveFirst, Writer kHow>
__global__ void operand_lock_kernel(const float* src, float* out) {
  FS_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* smem = aligned_smem(raw);
  unsigned char* b = smem;  // the B operand: 2 KiB
  auto* bar = reinterpret_cast<std::uint64_t*>(smem + 4096 - 8);
  if (threadIdx.x == 0) cuda::ptx::mbarrier_init(bar, 128);
  __syncthreads();
  if (threadIdx.x < 128) {
    float d[32];
    std::uint32_t a[4] = {0, 0, 0, 0};
    ptx::wgmma_fence();
    ptx::wgmma_m64n64k16_rs<__half>(d, a, ptx::wgmma_desc_sw128(ptx::smem_addr(b), 0, 1024), 0);
    ptx::wgmma_commit_group();
    if (kArriveFirst) cuda::ptx::mbarrier_arrive(bar);
    ptx::wgmma_wait_group<0>();
    if (!kArriveFirst) cuda::ptx::mbarrier_arrive(bar);
  } else if (threadIdx.x == 128) {
    while (!cuda::ptx::mbarrier_try_wait_parity(bar, 0)) {
    }
    if (kHow == Writer::store) {
      reinterpret_cast<float*>(b)[5] = 1.0f;
    } else {
      __pipeline_memcpy_async(b + 64, src, 16);
      __pipeline_commit();
      __pipeline_wait_prior(0);
    }
    out[0] = reinterpret_cast<float*>(b)[5];
  }
}

TEST_CASE(
    "lifetime: a wgmma's shared operand may be overwritten once a wait covering it is known") {
  REQUIRE(fsemu::access::instrumented());
  float src[4] = {1, 2, 3, 4}, out[1] = {0};
  CHECK(
      launch(operand_lock_kernel<false, Writer::store>, dim3(1), 256, kLockSmem, src, out).empty());
  CHECK(out[0] == 1.0f);
  CHECK(launch(operand_lock_kernel<false, Writer::cp_async>, dim3(1), 256, kLockSmem, src, out)
            .empty());
}

TEST_CASE("lifetime: a store into a wgmma's shared operand before its wait is known is a fault") {
  float src[4] = {1, 2, 3, 4}, out[1] = {0};
  const std::string why =
      launch(operand_lock_kernel<true, Writer::store>, dim3(1), 256, kLockSmem, src, out);
  CHECK_THAT(why, ContainsSubstring("thread (128, 0, 0)"));
  CHECK_THAT(why, ContainsSubstring("a store of 4 bytes at") &&
                      ContainsSubstring("operand_lock_kernel") &&
                      ContainsSubstring("lifetime_test.cu:" + std::to_string(kLockStoreLine)));
  CHECK_THAT(why, ContainsSubstring("wgmma.mma_async.m64n64k16 #1 of warpgroup 0") &&
                      ContainsSubstring("may still read (its B operand)") &&
                      ContainsSubstring("no wgmma.wait_group of warp"));
}

TEST_CASE("lifetime: a cp.async into a wgmma's shared operand before its wait is a fault") {
  float src[4] = {1, 2, 3, 4}, out[1] = {0};
  const std::string why =
      launch(operand_lock_kernel<true, Writer::cp_async>, dim3(1), 256, kLockSmem, src, out);
  CHECK_THAT(
      why, ContainsSubstring("a cp.async issued at") && ContainsSubstring("operand_lock_kernel") &&
               ContainsSubstring("writes shared memory 0x") &&
               ContainsSubstring("#1 of warpgroup 0") && ContainsSubstring("(its B operand)"));
}

// ---- 4. a wgmma's accumulator and A registers, until its wait
// ------------------------------------- kWhat: 0 writes nothing before the wait (O is rescaled
// after it), 1 writes an accumulator register before the wait, 2 an A-operand register.
constexpr int kAccWriteLine = __LINE__ + 13;  // the write into d below
constexpr int kAWriteLine = kAccWriteLine + 1;
template <int kWhat>
__global__ void accumulator_kernel(float* out) {
  FS_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* b = aligned_smem(raw);
  float d[32];
  std::uint32_t a[4] = {0, 0, 0, 0};
  for (float& x : d)
    x = 0.0f;
  ptx::wgmma_fence();
  ptx::wgmma_m64n64k16_rs<__half>(d, a, ptx::wgmma_desc_sw128(ptx::smem_addr(b), 0, 1024), 1);
  ptx::wgmma_commit_group();
  if (kWhat == 1) d[3] *= 0.5f;
  if (kWhat == 2) a[2] = 7u;
  ptx::wgmma_wait_group<0>();
  d[3] *= 0.5f;
  out[threadIdx.x] = d[3];
}

TEST_CASE("lifetime: a write into an in-flight wgmma's accumulator or A registers is a fault") {
  std::vector<float> out(128, 1.0f);
  CHECK(launch(accumulator_kernel<0>, dim3(1), 128, kLockSmem, out.data()).empty());
  const std::string acc = launch(accumulator_kernel<1>, dim3(1), 128, kLockSmem, out.data());
  CHECK_THAT(acc, ContainsSubstring("writes register 3 of its accumulator fragment (32 fp32") &&
                      ContainsSubstring("lifetime_test.cu:" + std::to_string(kAccWriteLine)) &&
                      ContainsSubstring("wgmma.mma_async.m64n64k16 #1") &&
                      ContainsSubstring("still in flight"));
  const std::string a = launch(accumulator_kernel<2>, dim3(1), 128, kLockSmem, out.data());
  CHECK_THAT(a, ContainsSubstring("writes register 2 of its A-operand fragment") &&
                    ContainsSubstring("lifetime_test.cu:" + std::to_string(kAWriteLine)));
}

// ---- 4b. a register written between a wgmma.fence and the wgmma that uses it -------------------
// A first wgmma (the block's tracking starts there) and its wait; then the second: kWhat 0 rescales
// an accumulator register before the fence, 1 after it (unordered), 2 writes an A register after
// it.
constexpr int kFencedAccLine = __LINE__ + 15;  // the write into d after the fence below
constexpr int kFencedALine = kFencedAccLine + 1;
template <int kWhat>
__global__ void fenced_write_kernel(float* out) {
  FS_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* b = aligned_smem(raw);
  const std::uint64_t desc = ptx::wgmma_desc_sw128(ptx::smem_addr(b), 0, 1024);
  float d[32];
  std::uint32_t a[4] = {0, 0, 0, 0};
  ptx::wgmma_fence();
  ptx::wgmma_m64n64k16_rs<__half>(d, a, desc, 0);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  if (kWhat == 0) d[3] *= 0.5f;
  ptx::wgmma_fence();
  if (kWhat == 1) d[3] *= 0.5f;
  if (kWhat == 2) a[2] = 7u;
  ptx::wgmma_m64n64k16_rs<__half>(d, a, desc, 1);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  out[threadIdx.x] = d[3];
}

TEST_CASE("lifetime: a register write between wgmma.fence and the wgmma using it is a fault") {
  std::vector<float> out(128, 1.0f);
  CHECK(launch(fenced_write_kernel<0>, dim3(1), 128, kLockSmem, out.data()).empty());
  const std::string acc = launch(fenced_write_kernel<1>, dim3(1), 128, kLockSmem, out.data());
  CHECK_THAT(acc,
             ContainsSubstring("wgmma.mma_async uses register 3 of its accumulator fragment") &&
                 ContainsSubstring("lifetime_test.cu:" + std::to_string(kFencedAccLine)) &&
                 ContainsSubstring("after the last wgmma.fence"));
  const std::string a = launch(fenced_write_kernel<2>, dim3(1), 128, kLockSmem, out.data());
  CHECK_THAT(a, ContainsSubstring("uses register 2 of its A-operand fragment") &&
                    ContainsSubstring("lifetime_test.cu:" + std::to_string(kFencedALine)));
}

// ---- 2. transaction bytes complete a phase ------------------------------------------------------
// Thread 0 arms the mbarrier with `expect` bytes and issues two TMA loads of a (32 x 64) fp16 box
// (4 KiB each) onto it; every thread then waits and reads one element of each box.
constexpr std::uint32_t kBoxBytes = 32 * 64 * 2;
__global__ void tx_kernel(const __grid_constant__ CUtensorMap map, std::uint32_t expect,
                          float* out) {
  FS_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* smem = aligned_smem(raw);
  auto* bar = reinterpret_cast<std::uint64_t*>(smem + 2 * kBoxBytes);
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(bar, 1);
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                         cuda::ptx::space_shared, bar, expect);
    for (int box = 0; box < 2; ++box) {
      const std::int32_t coords[2] = {0, 32 * box};
      cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                      smem + box * kBoxBytes, &map, coords, bar);
    }
  }
  __syncthreads();
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, 0)) {
  }
  const auto* h = reinterpret_cast<const __half*>(smem);
  out[threadIdx.x] = __half2float(h[threadIdx.x]) + __half2float(h[kBoxBytes / 2 + threadIdx.x]);
}

TEST_CASE("lifetime: an mbarrier phase completes when its bytes are met, not at the first wait") {
  std::vector<__half> g(64 * 64);
  for (std::size_t i = 0; i < g.size(); ++i)
    g[i] = __float2half(static_cast<float>(i % 61));
  alignas(64) CUtensorMap map;
  const std::uint64_t dims[2] = {64, 64}, strides[1] = {128};
  const std::uint32_t box[2] = {64, 32}, es[2] = {1, 1};
  REQUIRE(fsemu::model::encode_tiled(&map, fsemu::model::kTmaFloat16, 2, g.data(), dims, strides,
                                     box, es, fsemu::model::kTmaInterleaveNone,
                                     fsemu::model::kTmaSwizzleNone, 0,
                                     fsemu::model::kTmaOobFillNone) == "");
  std::vector<float> out(64, -1.0f);
  const std::size_t smem = 2 * kBoxBytes + 1024 + 64;
  // Both boxes' bytes: the phase completes once both have landed.
  REQUIRE(launch(tx_kernel, dim3(1), 64, smem, map, 2 * kBoxBytes, out.data()).empty());
  for (int t = 0; t < 64; ++t)
    CHECK(out[static_cast<std::size_t>(t)] == static_cast<float>(t % 61 + (32 * 64 + t) % 61));
  // One box's bytes: the phase completes when the first box has landed, the second still in
  // flight (today's emulator landed both at the first wait and passed).
  const std::string one = launch(tx_kernel, dim3(1), 64, smem, map, kBoxBytes, out.data());
  CHECK_THAT(one, ContainsSubstring("completed phase 0") &&
                      ContainsSubstring("while 1 TMA load(s) tracked by it, 4096 bytes, had not "
                                        "landed") &&
                      ContainsSubstring("expect_tx announced fewer bytes"));
  // A box and a half: it completes in the middle of the second box.
  const std::string half =
      launch(tx_kernel, dim3(1), 64, smem, map, kBoxBytes + kBoxBytes / 2, out.data());
  CHECK_THAT(half, ContainsSubstring("completed phase 0") && ContainsSubstring("2048 bytes"));
  // More bytes than the loads deliver: the phase never completes (a deadlock, as on the GPU).
  const std::string more =
      launch(tx_kernel, dim3(1), 64, smem, map, 2 * kBoxBytes + 16, out.data());
  CHECK_THAT(more, ContainsSubstring("deadlock") && ContainsSubstring("tx-count 16"));
}

// ---- 3. setmaxnreg against the launch's count and the block's pool
// ------------------------------- 384 threads: warpgroup 0 decreases to kDec, warpgroups 1 and 2
// increase to kInc (07c's and 07d's shape: launched with 168 = 65,536 / 384 rounded down to 8).
template <int kDec, int kInc>
__global__ void setmaxnreg_kernel(int* out) {
  if (threadIdx.x < 128) {
    ptx::setmaxnreg_dec<kDec>();
  } else {
    ptx::setmaxnreg_inc<kInc>();
  }
  out[threadIdx.x] = 1;
}

TEST_CASE("lifetime: setmaxnreg starts from the launch's count and draws on the block's pool") {
  std::vector<int> out(384, 0);
  // 168 -> 24 frees 144 x 128 = 18,432 registers; 168 -> 240 takes 72 x 256 = 18,432.
  CHECK(launch(setmaxnreg_kernel<24, 240>, dim3(1), 384, 0, out.data()).empty());
  // A .dec above the launch's count raises it.
  const std::string dec = launch(setmaxnreg_kernel<176, 240>, dim3(1), 384, 0, out.data());
  CHECK_THAT(dec, ContainsSubstring("setmaxnreg.dec to 176 from 168 registers per thread") &&
                      ContainsSubstring("the most a block of 384 threads can be launched with") &&
                      ContainsSubstring(".dec must not raise it"));
  // An .inc the pool can never satisfy blocks forever on the GPU: a deadlock here.
  const std::string inc = launch(setmaxnreg_kernel<24, 248>, dim3(1), 384, 0, out.data());
  CHECK_THAT(inc, ContainsSubstring("deadlock") &&
                      ContainsSubstring("setmaxnreg.inc to 248 from 168 registers per thread") &&
                      ContainsSubstring("needs 10240 registers from the block's pool, which holds "
                                        "8192"));
}

TEST_CASE("lifetime: setmaxnreg takes the kernel's count from its ptxas report") {
  const void* kernel = reinterpret_cast<const void*>(&setmaxnreg_kernel<136, 200>);
  const std::string name = fsemu::access::function_name(kernel);
  REQUIRE_THAT(name, ContainsSubstring("setmaxnreg_kernel<136, 200>"));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fsemu-ptxas-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "test.ptxas.txt")
      << "## lifetime_test.cu.o\nptxas info    : Compiling entry function 'void " << name
      << "(int*)' for 'sm_90a'\nptxas info    : Used 128 registers, used 0 barriers\n";
  ::setenv("FSEMU_PTXAS_REPORTS", dir.c_str(), 1);
  std::vector<int> out(384, 0);
  const std::string why = launch(setmaxnreg_kernel<136, 200>, dim3(1), 384, 0, out.data());
  ::unsetenv("FSEMU_PTXAS_REPORTS");
  std::filesystem::remove_all(dir);
  CHECK_THAT(why, ContainsSubstring("setmaxnreg.dec to 136 from 128 registers per thread") &&
                      ContainsSubstring("the count ptxas reports for the kernel in"));
}

// ---- 5. the driver's grid limit
// ------------------------------------------------------------------
__global__ void nothing_kernel(int*) {}

TEST_CASE("lifetime: a grid.x of 2^31 or more is refused, as the driver does") {
  int out = 0;
  CHECK(launch(nothing_kernel, dim3(0x80000000u), 32, 0, &out) == "invalid configuration argument");
  CHECK(launch(nothing_kernel, dim3(2), 32, 0, &out).empty());
}

}  // namespace
