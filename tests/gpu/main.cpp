// tests/gpu/main.cpp — main() of every test_<stage> binary: the stage library linked next to it
// provides make_stage(); the suite (its test cases, Catch2's session) is tests/gpu/suite_main.cpp
// and suite.cpp, in a library every test binary shares.
#include "suite.hpp"

int main(int argc, char** argv) {
  return flashsteps::test::suite_main(argc, argv, flashsteps::make_stage());
}
