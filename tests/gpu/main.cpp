// tests/gpu/main.cpp — main() of every emulated suite (test_emu_<stage>, emu/CMakeLists.txt): the
// stage linked into the binary provides make_stage(); the suite is suite_main.cpp and suite.cpp.
// (The GPU build's test_<stage> is launcher.cpp, which execs fs_gpu_suite: suite_exe.cpp.)
#include "suite.hpp"

int main(int argc, char** argv) {
  return flashsteps::test::suite_main(argc, argv, flashsteps::make_stage());
}
