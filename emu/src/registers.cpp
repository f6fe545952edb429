// emu/src/registers.cpp — the register count a kernel is launched with (registers.hpp): what
// setmaxnreg's first change of a warpgroup starts from.
#include "registers.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <string>

#include "fsemu/access.hpp"
#include "fsemu/scheduler.hpp"

#ifndef FSEMU_PTXAS_REPORTS_DIR
#define FSEMU_PTXAS_REPORTS_DIR ""
#endif

namespace fsemu {
namespace {

struct Reported {
  int registers;
  std::string file;
};

// Every kernel of every ptxas report in the directory: its sm_90a register count (the emulated
// device), or another arch's if it has no sm_90a entry. Read for each kernel the first time it
// runs (a handful per program).
std::map<std::string, Reported> reports() {
  std::map<std::string, Reported> out;
  const char* env = std::getenv("FSEMU_PTXAS_REPORTS");
  const std::filesystem::path dir = env ? env : FSEMU_PTXAS_REPORTS_DIR;
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return {};
  const std::regex entry(R"(Compiling entry function '(.*)' for '(sm_[0-9a-z]+)')");
  const std::regex used(R"(Used ([0-9]+) registers)");
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.path().extension() != ".txt") continue;
    std::ifstream in(f.path());
    std::string line, kernel, arch;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, entry)) {
        kernel = access::without_signature(m[1]);
        arch = m[2];
      } else if (!kernel.empty() && std::regex_search(line, m, used)) {
        const auto it = out.find(kernel);
        if (it == out.end() || arch == "sm_90a")
          out[kernel] = Reported{std::stoi(m[1]), f.path().string()};
        kernel.clear();
      }
    }
  }
  return out;
}

}  // namespace

const KernelRegisters& kernel_registers() {
  static std::map<const void*, KernelRegisters> cache;
  const void* kernel = running_kernel();
  const auto hit = cache.find(kernel);
  if (hit != cache.end()) return hit->second;
  const std::string name = kernel ? access::function_name(kernel) : "";
  const std::map<std::string, Reported> all = reports();
  const auto it = name.empty() ? all.end() : all.find(name);
  KernelRegisters r;
  if (it != all.end()) {
    r = {it->second.registers, "the count ptxas reports for the kernel in " + it->second.file};
  } else {
    // __launch_bounds__(threads, 1)'s cap: registers are given 8 per thread at a time.
    const dim3 b = self().block_dim;
    const long threads = static_cast<long>(b.x) * b.y * b.z;
    const long warps_threads = (threads + 31) / 32 * 32;
    const int cap = static_cast<int>(std::min(255L, 65536 / warps_threads / 8 * 8));
    r = {cap, "the most a block of " + std::to_string(threads) +
                  " threads can be launched with: no ptxas report names the kernel" +
                  (name.empty() ? std::string() : " " + name)};
  }
  return cache.emplace(kernel, r).first->second;
}

}  // namespace fsemu
