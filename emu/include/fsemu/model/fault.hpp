// emu/include/fsemu/model/fault.hpp — how an instruction model says "this use breaks the ISA's
// rules": it throws Fault with a sentence naming the instruction, the rule and the values. The
// emulator's runtime catches it, adds the block, thread and launch, and fails the launch.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fsemu::model {

struct Fault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A block's shared memory as the instruction models see it: `size` bytes at `base`; shared
/// address a (the 32-bit shared-state-space address of PTX, what __cvta_generic_to_shared gives)
/// is base[a]. Every access is bounds-checked: an address outside the window is a Fault.
struct SharedWindow {
  std::uint8_t* base = nullptr;
  std::uint32_t size = 0;

  void check(std::uint32_t addr, std::uint32_t bytes, const char* what) const {
    if (std::uint64_t{addr} + bytes > size)
      throw Fault(std::string(what) + ": shared address 0x" + hex(addr) + " + " +
                  std::to_string(bytes) + " bytes lies outside the block's " +
                  std::to_string(size) + " bytes of shared memory");
  }
  template <class T>
  T load(std::uint32_t addr, const char* what) const {
    check(addr, sizeof(T), what);
    T v;
    std::memcpy(&v, base + addr, sizeof(T));
    return v;
  }
  template <class T>
  void store(std::uint32_t addr, const T& v, const char* what) {
    check(addr, sizeof(T), what);
    std::memcpy(base + addr, &v, sizeof(T));
  }
  static std::string hex(std::uint64_t v) {
    static const char* d = "0123456789abcdef";
    std::string s;
    do {
      s.insert(s.begin(), d[v & 15]);
      v >>= 4;
    } while (v);
    return s;
  }
};

/// The 16-bit element types of the tensor-core instructions the stages use.
enum class Elem : int { f16, bf16 };

/// The exact value of a 16-bit element (every fp16 and bf16 value is exact in fp32).
float elem_to_float(Elem e, std::uint16_t bits);

}  // namespace fsemu::model
