// tests/gpu/launcher.cpp — main() of every test_<stage> binary of the GPU build. It links the
// stage's shared library (a WATCHDOG stage's _checked one), finds that library's path, and execs
// fs_gpu_suite, the one suite executable of the build, next to this binary, with the same argv
// (argv[0] kept) and the library's path in the environment (stage_entry.hpp): the suite's output
// and exit codes are the binary's. It returns only when that cannot be done: a refusal, exit 1.
// (Plain POSIX calls, no iostreams or std::filesystem: the binary stays a few kilobytes.)
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "flashsteps/stage.hpp"
#include "stage_entry.hpp"

int main(int argc, char** argv) {
  using namespace flashsteps::test;
  const std::string who = program_name(argc, argv);
  const auto refuse = [&](const std::string& reason) {
    return flashsteps::test::refuse(who, reason);
  };
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return refuse(std::string("cannot find this binary's own path (/proc/self/exe: ") +
                  std::strerror(errno) + ")");
  self[n] = '\0';
  // The library that defines the entry point: the stage library this binary links. (A binary
  // that is not position-independent would see its own stub of the function here: refused.)
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&flashsteps_new_stage), &info) || !info.dli_fname ||
      std::strcmp(info.dli_fname, self) == 0)
    return refuse("cannot find the stage library that defines flashsteps_new_stage()");
  char library[PATH_MAX];
  if (!realpath(info.dli_fname, library))
    return refuse(std::string("the stage library ") + info.dli_fname + ": " + std::strerror(errno));
  std::string suite = self;
  suite = suite.substr(0, suite.rfind('/') + 1) + kSuiteExecutable;
  if (access(suite.c_str(), F_OK) != 0)
    return refuse("the GPU suite " + suite + " does not exist (build fs_gpu_suite)");
  setenv(kStageLibraryVariable, library, 1);
  execv(suite.c_str(), argv);
  return refuse("cannot run the GPU suite " + suite + ": " + std::strerror(errno));
}
