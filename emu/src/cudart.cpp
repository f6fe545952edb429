// emu/src/cudart.cpp — the CUDA runtime functions the project calls, for the emulation build,
// which links this instead of libcudart. "Device" memory is host memory; every launch runs at
// once (fsemu/launch.hpp), so streams and events only keep their handles. The device is an
// emulated sm_90a part with 8 SMs (a small SM count keeps "fill the GPU" test grids small) and
// H100's per-block limits; its name says it is emulated.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "device_limits.hpp"
#include "fsemu/async.hpp"
#include "fsemu/launch.hpp"
#include "fsemu/model/tma.hpp"
#include "global_races.hpp"
#include "profile.hpp"
#include "registers.hpp"
#include "trace.hpp"

namespace {

using fsemu::device_limits::kSmCount;
constexpr std::size_t kSmemOptin = 227 * 1024;  // H100: 232,448 bytes per block with opt-in
constexpr std::size_t kSmemDefault = 48 * 1024;
constexpr std::size_t kGlobalMem = std::size_t{16} << 30;  // what this emulated device offers

cudaError_t g_last = cudaSuccess;
std::string g_failure;  // the last launch failure's report
std::map<const void*, std::size_t> g_smem_optin;
std::map<void*, std::size_t> g_allocations;
std::size_t g_allocated = 0;

cudaError_t set(cudaError_t e) {
  if (e != cudaSuccess) g_last = e;
  return e;
}

struct Event {
  std::chrono::steady_clock::time_point t;
};

}  // namespace

namespace fsemu {

namespace {
const void* g_kernel = nullptr;  // the kernel of the running launch
}  // namespace
const void* running_kernel() {
  return g_kernel;
}

cudaError_t launch(const void* kernel, dim3 grid, dim3 block, std::size_t smem, cudaStream_t,
                   const std::function<void()>& body) {
  const std::size_t threads = std::size_t{block.x} * block.y * block.z;
  // The driver's limits: grid.x < 2^31, grid.y and grid.z <= 65535.
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
    return set(cudaErrorInvalidConfiguration);
  const auto optin = g_smem_optin.find(kernel);
  const std::size_t limit = optin == g_smem_optin.end() ? kSmemDefault : optin->second;
  if (smem > limit) return set(cudaErrorInvalidValue);  // as the runtime: no opt-in, no launch
  LaunchConfig c;
  c.grid = grid;
  c.block = block;
  c.dynamic_smem = smem;
  c.run_block = profile::run_block;  // every block, or the profile's sample
  g_kernel = kernel;
  profile::launch_begin(kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem);
  global_races::launch_begin(grid.x, grid.y, grid.z);
  trace::launch_begin(kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z);
  g_failure = run_grid(c, body);
  async::finish_launch(g_failure.empty());  // reduce-adds that only a .read wait covered
  trace::launch_end();
  global_races::launch_end();
  profile::launch_end(g_failure.empty());
  g_kernel = nullptr;
  if (!g_failure.empty()) return set(cudaErrorLaunchFailure);
  return cudaSuccess;
}

}  // namespace fsemu

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : set(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties_v2(cudaDeviceProp* prop, int device) {
  if (device != 0) return set(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, "fsemu CPU emulator of an sm_90a GPU", sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = kSmCount;
  prop->totalGlobalMem = kGlobalMem;
  prop->sharedMemPerBlock = kSmemDefault;
  prop->sharedMemPerBlockOptin = kSmemOptin;
  prop->sharedMemPerMultiprocessor = fsemu::device_limits::kSmemPerSm;
  prop->maxThreadsPerMultiProcessor = fsemu::device_limits::kThreadsPerSm;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  prop->regsPerBlock = 65536;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return cudaGetDeviceProperties_v2(prop, device);
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return set(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrClockRate:
      *value = 1'000'000;  // kHz; emulated clock: nothing is timed against it
      return cudaSuccess;
    case cudaDevAttrMemoryClockRate:
      *value = 1'000'000;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(kSmemOptin);
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = kSmCount;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    default:
      return set(cudaErrorInvalidValue);
  }
}

cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) {
  *total = kGlobalMem;
  *free = kGlobalMem - g_allocated;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  *p = nullptr;
  if (bytes > kGlobalMem - g_allocated) return set(cudaErrorMemoryAllocation);
#if defined(__SANITIZE_ADDRESS__)
  // 256-byte aligned, as cudaMalloc's are, and exactly `bytes` under AddressSanitizer: its
  // redzone starts where the buffer ends, so a kernel that reads or writes past it is reported
  // (emu/src/sanitize.hpp).
  void* q = nullptr;
  if (posix_memalign(&q, 256, bytes ? bytes : 1) != 0) q = nullptr;
#else
  // 256-byte aligned, as cudaMalloc's are.
  void* q = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
#endif
  if (!q) return set(cudaErrorMemoryAllocation);
  // cudaMalloc's memory holds whatever was there before; here it holds NaN (0xFF bytes are a NaN
  // in fp32, fp16 and bf16), so a kernel that reads memory nothing wrote — a workspace's padding,
  // say — computes NaN instead of quietly reading the zeros a fresh host page would give.
  std::memset(q, 0xFF, bytes);
  g_allocations[q] = bytes;
  fsemu::profile::note_allocation(q, bytes);
  fsemu::global_races::note_allocation(q, bytes);
  fsemu::trace::note_allocation(q, bytes);
  g_allocated += bytes;
  *p = q;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  const auto it = g_allocations.find(p);
  if (it == g_allocations.end()) return set(cudaErrorInvalidValue);
  g_allocated -= it->second;
  g_allocations.erase(it);
  fsemu::profile::note_free(p);
  fsemu::global_races::note_free(p);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) {
  std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t) {
  return cudaMemset(dst, value, bytes);
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  static int tag;
  *s = reinterpret_cast<cudaStream_t>(&tag);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new Event{});
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<Event*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  reinterpret_cast<Event*>(e)->t = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(reinterpret_cast<Event*>(b)->t -
                                                 reinterpret_cast<Event*>(a)->t)
            .count();
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  return g_last;
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    default:
      return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  static std::string text;
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorLaunchFailure:
      text = "unspecified launch failure (" + g_failure + ")";
      return text.c_str();
    default:
      return "unknown error";
  }
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return set(cudaErrorInvalidValue);
  if (value < 0 || static_cast<std::size_t>(value) > kSmemOptin) return set(cudaErrorInvalidValue);
  g_smem_optin[func] = static_cast<std::size_t>(value);
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
  std::memset(a, 0, sizeof(*a));
  const auto it = g_smem_optin.find(func);
  a->maxDynamicSharedSizeBytes = it == g_smem_optin.end() ? 0 : static_cast<int>(it->second);
  a->maxThreadsPerBlock = 1024;
  a->ptxVersion = a->binaryVersion = 90;
  return cudaSuccess;  // registers and spills are the compiler's: not known here (0)
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int,
                                                          std::size_t) {
  *blocks = 1;
  return cudaSuccess;
}

}  // extern "C"

namespace {

// cuTensorMapEncodeTiled for the emulator: the map is the model's (fsemu/model/tma.hpp).
CUresult encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                      const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                      const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
                      CUtensorMapFloatOOBfill fill) {
  const std::string why = fsemu::model::encode_tiled(
      map, static_cast<int>(type), rank, address, dims, strides, box, element_strides,
      static_cast<int>(interleave), static_cast<int>(swizzle), static_cast<int>(promotion),
      static_cast<int>(fill));
  if (why.empty()) return CUDA_SUCCESS;
  std::fprintf(stderr, "fsemu: cuTensorMapEncodeTiled: %s\n", why.c_str());
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

extern "C" cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int,
                                                        unsigned long long,
                                                        cudaDriverEntryPointQueryResult* status) {
  if (std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0) {
    *fn = reinterpret_cast<void*>(&encode_tiled);
    if (status) *status = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  *fn = nullptr;
  if (status) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
