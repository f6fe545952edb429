// emu/src/device_limits.hpp — the emulated device's per-SM limits (an sm_90a part with H100's
// limits and 8 SMs), read by the runtime's device properties (cudart.cpp) and by the residency
// rule of blocks that wait on each other (scheduler.cpp). Internal to emu/src.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace fsemu::device_limits {

inline constexpr int kSmCount = 8;
inline constexpr int kThreadsPerSm = 2048;                  // 64 warps
inline constexpr int kBlocksPerSm = 32;                     // sm_90
inline constexpr std::size_t kSmemPerSm = 228 * 1024;       // shared memory per SM
inline constexpr std::size_t kSmemReservedPerBlock = 1024;  // the system's share per block

/// Blocks of `threads` threads and `dynamic_smem` bytes of dynamic shared memory that one SM
/// holds at once, by threads (whole warps), blocks and shared memory; registers and static shared
/// memory are not known to the emulator at a launch and not counted (emu/README.md).
inline std::uint64_t blocks_per_sm(std::uint64_t threads, std::size_t dynamic_smem) {
  const std::uint64_t warps = (threads + 31) / 32;
  std::uint64_t n = std::min<std::uint64_t>(kBlocksPerSm, kThreadsPerSm / 32 / warps);
  n = std::min<std::uint64_t>(n, kSmemPerSm / (dynamic_smem + kSmemReservedPerBlock));
  return std::max<std::uint64_t>(n, 1);
}

}  // namespace fsemu::device_limits
