// tests/gpu/launcher.cpp — main() of every test_<stage> binary of the GPU build. It links the
// stage's shared library (a WATCHDOG stage's _checked one), finds that library's path, and execs
// fs_gpu_suite, the one suite executable of the build, next to this binary, with the same argv
// (argv[0] kept) and the library's path in the environment (stage_entry.hpp): the suite's output
// and exit codes are the binary's. It returns only when that cannot be done: a refusal, exit 1.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "flashsteps/stage.hpp"
#include "stage_entry.hpp"

namespace {

int refuse(const std::string& who, const std::string& reason) {
  std::cerr << flashsteps::refusal(who, reason) << '\n';
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace flashsteps::test;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string who = argc > 0 ? fs::path(argv[0]).filename().string() : "test_<stage>";
  if (ec)
    return refuse(who, "cannot find this binary's own path (/proc/self/exe: " + ec.message() + ")");
  // The library that defines the entry point: the stage library this binary links. (A binary
  // that is not position-independent would see its own stub of the function here: refused.)
  Dl_info info{};
  const void* entry = reinterpret_cast<const void*>(&flashsteps_new_stage);
  if (!dladdr(entry, &info) || !info.dli_fname || self == fs::path(info.dli_fname))
    return refuse(who, "cannot find the stage library that defines flashsteps_new_stage()");
  const fs::path library = fs::absolute(info.dli_fname, ec);
  if (!fs::exists(library, ec))
    return refuse(who, "the stage library " + library.string() + " does not exist");
  const fs::path suite = self.parent_path() / kSuiteExecutable;
  if (!fs::exists(suite, ec))
    return refuse(who, "the GPU suite " + suite.string() + " does not exist (build fs_gpu_suite)");
  setenv(kStageLibraryVariable, library.c_str(), 1);
  execv(suite.c_str(), argv);
  const int e = errno;
  return refuse(who, "cannot run the GPU suite " + suite.string() + ": " + std::strerror(e));
}
