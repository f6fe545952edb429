// bench/stage_main.cpp — main() of every bench_<stage> binary: the stage library linked next to it
// provides make_stage(); the harness (bench/harness.cpp) is in a library every bench shares.
#include "harness.hpp"

int main(int argc, char** argv) {
  return flashsteps::bench::bench_main(argc, argv, flashsteps::make_stage());
}
