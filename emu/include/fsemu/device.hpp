// emu/include/fsemu/device.hpp — the built-in variables and intrinsics of CUDA C++ as the
// emulator runs them (included through emu/shim/fsemu_device.hpp). Warp-synchronous intrinsics
// are warp-collective operations (fsemu/scheduler.hpp): every lane in the member mask must reach
// the same operation, and a lane outside the mask, or a source lane outside it, is a fault.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "fsemu/scheduler.hpp"

#define threadIdx (::fsemu::self().thread_idx)
#define blockIdx (::fsemu::self().block_idx)
#define blockDim (::fsemu::self().block_dim)
#define gridDim (::fsemu::self().grid_dim)
#ifndef warpSize
#define warpSize 32
#endif

namespace fsemu {

enum class ShuffleMode { idx, up, down, bfly };
/// shfl.sync on a 32-bit (or 64-bit, as two shuffles) payload.
std::uint64_t shuffle(ShuffleMode mode, std::uint32_t mask, std::uint64_t value, int operand,
                      int width);
enum class VoteMode { ballot, any, all };
std::uint32_t vote(VoteMode mode, std::uint32_t mask, bool predicate);
void syncwarp(std::uint32_t mask);
long long clock_cycles();

/// atom.add / red.add on global or shared memory (atomicAdd): returns the old value. Each is one
/// atomic read-modify-write of the access observers (fsemu/access.hpp) at the kernel's line, and
/// an atomic operation for ThreadSanitizer in the TSan build. fp32 on global memory flushes
/// subnormal inputs and results to zero, on shared memory it keeps them (PTX ISA, atom).
float atomic_add(float* address, float value);
double atomic_add(double* address, double value);
int atomic_add(int* address, int value);
unsigned atomic_add(unsigned* address, unsigned value);
unsigned long long atomic_add(unsigned long long* address, unsigned long long value);

template <class T>
T shuffle_as(ShuffleMode mode, std::uint32_t mask, T value, int operand, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "the emulator shuffles values of at most 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle(mode, mask, bits, operand, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace fsemu

inline void __syncthreads() {
  ::fsemu::bar_sync(0, 0, "__syncthreads()");
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::fsemu::syncwarp(mask);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::fsemu::shuffle_as(::fsemu::ShuffleMode::idx, mask, v, src, width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::fsemu::shuffle_as(::fsemu::ShuffleMode::bfly, mask, v, lane_mask, width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::fsemu::shuffle_as(::fsemu::ShuffleMode::up, mask, v, static_cast<int>(delta), width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::fsemu::shuffle_as(::fsemu::ShuffleMode::down, mask, v, static_cast<int>(delta), width);
}
inline unsigned __ballot_sync(unsigned mask, int p) {
  return ::fsemu::vote(::fsemu::VoteMode::ballot, mask, p != 0);
}
inline int __any_sync(unsigned mask, int p) {
  return ::fsemu::vote(::fsemu::VoteMode::any, mask, p != 0) != 0;
}
inline int __all_sync(unsigned mask, int p) {
  return ::fsemu::vote(::fsemu::VoteMode::all, mask, p != 0) != 0;
}
// atomicAdd: always inlined, so that the emulator's return address is the kernel's line.
#define FSEMU_ATOMIC_ADD(T)                                                \
  __attribute__((always_inline)) inline T atomicAdd(T* address, T value) { \
    return ::fsemu::atomic_add(address, value);                            \
  }
FSEMU_ATOMIC_ADD(float)
FSEMU_ATOMIC_ADD(double)
FSEMU_ATOMIC_ADD(int)
FSEMU_ATOMIC_ADD(unsigned)
FSEMU_ATOMIC_ADD(unsigned long long)
#undef FSEMU_ATOMIC_ADD
[[noreturn]] inline void __trap() {
  ::fsemu::fault("__trap() (the kernel trapped)");
}
inline long long clock64() {
  return ::fsemu::clock_cycles();
}
inline void __threadfence() {}
inline void __threadfence_block() {}
/// cvta.to.shared: the 32-bit shared address of a generic pointer into shared memory.
inline std::size_t __cvta_generic_to_shared(const void* p) {
  return ::fsemu::shared_address(p, "__cvta_generic_to_shared");
}
template <class T>
T __ldg(const T* p) {
  return *p;
}

// CUDA's device min/max take mixed integer types; the host has only std::min/std::max.
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline int max(int a, int b) {
  return a > b ? a : b;
}
inline unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
inline unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
inline long long min(long long a, long long b) {
  return a < b ? a : b;
}
inline long long max(long long a, long long b) {
  return a > b ? a : b;
}
inline long min(long a, long b) {
  return a < b ? a : b;
}
inline long max(long a, long b) {
  return a > b ? a : b;
}
inline float min(float a, float b) {
  return std::fmin(a, b);
}
inline float max(float a, float b) {
  return std::fmax(a, b);
}

// The runtime's C++ overloads that take a kernel itself (cuda_runtime.h has them for nvcc only).
template <class R, class... Params>
cudaError_t cudaFuncSetAttribute(R (*kernel)(Params...), cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
template <class R, class... Params>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, R (*kernel)(Params...)) {
  return ::cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(kernel));
}
