#include "flashsteps/device_info.hpp"

#include <cuda_runtime.h>

#include <sstream>

#include "flashsteps/cuda_check.hpp"

namespace flashsteps {

std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string DeviceInfo::summary() const {
  std::ostringstream s;
  s << name << " (sm_" << cc_major << cc_minor << ", " << sm_count << " SMs, " << sm_clock_mhz
    << " MHz max SM clock, " << (total_mem_bytes >> 30) << " GiB, L2 " << (l2_bytes >> 20)
    << " MiB, driver " << cuda_version_string(driver_version) << ", runtime "
    << cuda_version_string(runtime_version) << ")";
  return s.str();
}

std::string no_gpu_reason(int cuda_error, int driver_version, int runtime_version) {
  const auto err = static_cast<cudaError_t>(cuda_error);
  const bool no_driver = err == cudaErrorInsufficientDriver && driver_version == 0;
  if (err == cudaSuccess || err == cudaErrorNoDevice || no_driver) {
    return "no NVIDIA GPU or driver found";
  }
  if (err == cudaErrorInsufficientDriver) {
    return "the NVIDIA driver supports CUDA " + cuda_version_string(driver_version) +
           ", older than the CUDA " + cuda_version_string(runtime_version) +
           " runtime this build uses: update the driver";
  }
  return std::string("no usable NVIDIA GPU: ") + cudaGetErrorString(err) + " (" +
         cudaGetErrorName(err) + ")";
}

std::optional<DeviceInfo> query_device(int id, std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why) {
      int driver = 0, runtime = 0;
      cudaDriverGetVersion(&driver);  // 0 when no driver is installed
      cudaRuntimeGetVersion(&runtime);
      *why = no_gpu_reason(err, driver, runtime);
    }
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return std::nullopt;
  }
  if (id < 0 || id >= count) {
    if (why)
      *why =
          "device " + std::to_string(id) + " does not exist (" + std::to_string(count) + " found)";
    return std::nullopt;
  }
  FS_CUDA_CHECK(cudaSetDevice(id));
  cudaDeviceProp prop{};
  FS_CUDA_CHECK(cudaGetDeviceProperties(&prop, id));
  DeviceInfo d;
  d.id = id;
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.total_mem_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  d.l2_bytes = prop.l2CacheSize;
  d.smem_optin_per_block = static_cast<std::int64_t>(prop.sharedMemPerBlockOptin);
  d.smem_per_sm = static_cast<std::int64_t>(prop.sharedMemPerMultiprocessor);
  d.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  d.mem_bus_bits = prop.memoryBusWidth;
  int khz = 0;
  FS_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, id));
  d.sm_clock_mhz = khz / 1000;
  FS_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, id));
  d.mem_clock_mhz = khz / 1000;
  FS_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  FS_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

std::int64_t free_device_memory() {
  std::size_t free = 0, total = 0;
  FS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<std::int64_t>(free);
}

}  // namespace flashsteps
