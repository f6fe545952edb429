// emu/src/registers.hpp — the register count a kernel is launched with (registers.cpp), what
// setmaxnreg's first change of a warpgroup starts from. Internal to emu/src.
#pragma once

#include <string>

namespace fsemu {

/// The per-thread register count the running kernel is launched with: the count ptxas reported
/// for it (the build's resources/<stage>.ptxas.txt, found by the kernel's name), else the most a
/// block of its size can be given (65,536 registers, 8 per thread at a time). `source` says which.
struct KernelRegisters {
  int count;
  std::string source;
};
const KernelRegisters& kernel_registers();
/// The kernel function of the running launch (emu/src/cudart.cpp), or null.
const void* running_kernel();

}  // namespace fsemu
