// tests/gpu/suite_exe.cpp — main() of fs_gpu_suite, the one GPU suite executable of a build:
// Catch2's session, the suite's test cases (suite.cpp) and suite_main (suite_main.cpp) are linked
// into it once. A test_<stage> binary (launcher.cpp) execs it with the stage library's path in
// FLASHSTEPS_SUITE_STAGE_LIBRARY; it loads that library, takes the stage from its
// flashsteps_new_stage() (stage_entry.hpp) and hands it to suite_main with the unchanged argv.
#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "stage_entry.hpp"
#include "suite.hpp"

int main(int argc, char** argv) {
  using namespace flashsteps::test;
  const std::string who = program_name(argc, argv);  // the test_<stage> binary's
  const auto refuse = [&](const std::string& reason) {
    return flashsteps::test::refuse(who, reason);
  };
  const char* library = std::getenv(kStageLibraryVariable);
  if (!library || !*library)
    return refuse(std::string(kStageLibraryVariable) +
                  " names no stage library: run a test_<stage> binary, which sets it");
  const std::string path = library;
  unsetenv(kStageLibraryVariable);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return refuse("cannot load the stage library " + path + ": " + dlerror());
  const auto entry = reinterpret_cast<flashsteps::Stage* (*)()>(dlsym(handle, kStageEntry));
  if (!entry) return refuse("the stage library " + path + " has no " + kStageEntry + "()");
  // The library stays loaded: the stage's code and kernels are in it.
  return suite_main(argc, argv, std::unique_ptr<flashsteps::Stage>(entry()));
}
