// flashsteps/device_info.hpp — what we record about the GPU next to every result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace flashsteps {

struct DeviceInfo {
  int id = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_clock_mhz = 0;   ///< peak SM clock reported by the driver
  int mem_clock_mhz = 0;  ///< peak memory clock reported by the driver
  int mem_bus_bits = 0;
  int driver_version = 0;   ///< e.g. 13000
  int runtime_version = 0;  ///< e.g. 13000
  std::int64_t total_mem_bytes = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t smem_optin_per_block = 0;  ///< cudaDevAttrMaxSharedMemoryPerBlockOptin
  std::int64_t smem_per_sm = 0;
  int max_threads_per_sm = 0;

  int compute_capability() const { return cc_major * 10 + cc_minor; }
  /// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, driver 13.0, runtime 13.0)"
  std::string summary() const;
};

/// Queries device `id`. Without a usable GPU, returns nullopt and puts the reason in `why`.
std::optional<DeviceInfo> query_device(int id, std::string* why);

/// Why no GPU can be used, in a newcomer's words, from cudaGetDeviceCount's error (`cuda_error`,
/// a cudaError_t) and the driver's and runtime's CUDA versions (cudaDriverGetVersion gives 0
/// when no driver is installed). CUDA reports a missing driver as "driver version is
/// insufficient"; this says "no NVIDIA GPU or driver found" then, and names both versions only
/// when a driver is there but older than the runtime.
std::string no_gpu_reason(int cuda_error, int driver_version, int runtime_version);

/// Free device memory now (cudaMemGetInfo).
std::int64_t free_device_memory();

/// "13.0" from 13000.
std::string cuda_version_string(int v);

}  // namespace flashsteps
