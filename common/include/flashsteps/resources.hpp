// flashsteps/resources.hpp — per-kernel resources as the runtime sees them: registers, shared
// memory, local memory (spills) and blocks per SM from the occupancy API.
#pragma once

#include <string>
#include <vector>

#include "flashsteps/device_info.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps {

struct KernelResources {
  std::string name;
  int registers = 0;
  std::size_t static_smem = 0, dynamic_smem = 0, local_bytes = 0;
  int block_threads = 0;
  int blocks_per_sm = 0;
  double occupancy = 0;  ///< theoretical: resident warps / max warps per SM
};

std::vector<KernelResources> kernel_resources(const Stage& s, const Problem& p,
                                              const DeviceInfo& dev);

}  // namespace flashsteps
