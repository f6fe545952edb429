// tests/catch2_session.cpp — with Catch2 2 (header only): Catch2's runner, compiled once here
// instead of in every test binary's main() (tests/flashsteps_catch.hpp). The top CMakeLists.txt
// builds it into flashsteps_catch2_session, which flashsteps::catch2 links.
#define FLASHSTEPS_CATCH_SESSION_IMPL
#define FLASHSTEPS_CATCH_SESSION
#include "flashsteps_catch.hpp"

namespace flashsteps::test {

int run_catch_session(int argc, char** argv) {
  return Catch::Session().run(argc, argv);
}

}  // namespace flashsteps::test
