#include "flashsteps/resources.hpp"

#include "flashsteps/cuda_check.hpp"

namespace flashsteps {

std::vector<KernelResources> kernel_resources(const Stage& s, const Problem& p,
                                              const DeviceInfo& dev) {
  std::vector<KernelResources> out;
  for (const KernelLaunchInfo& k : s.kernels(p)) {
    cudaFuncAttributes attr{};
    FS_CUDA_CHECK(cudaFuncGetAttributes(&attr, k.func));
    KernelResources r;
    r.name = k.name;
    r.registers = attr.numRegs;
    r.static_smem = attr.sharedSizeBytes;
    r.dynamic_smem = k.smem_bytes;
    r.local_bytes = attr.localSizeBytes;
    r.block_threads = k.block_threads;
    FS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, k.func,
                                                                k.block_threads, k.smem_bytes));
    const int warps = (k.block_threads + 31) / 32;
    r.occupancy = dev.max_threads_per_sm > 0
                      ? static_cast<double>(r.blocks_per_sm * warps) / (dev.max_threads_per_sm / 32)
                      : 0.0;
    out.push_back(r);
  }
  return out;
}

}  // namespace flashsteps
