// tests/cpu/main.cpp — main() of test_cpu (tests/flashsteps_catch.hpp: Catch2 2 or 3).
#define FLASHSTEPS_CATCH_SESSION
#include "flashsteps_catch.hpp"

int main(int argc, char** argv) {
  return flashsteps::test::run_catch_session(argc, argv);
}
