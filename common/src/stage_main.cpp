// main() of every stageNN binary: the stage library linked next to it provides make_stage().
#include "flashsteps/runner.hpp"

int main(int argc, char** argv) {
  auto stage = flashsteps::make_stage();
  return flashsteps::runner_main(argc, argv, *stage);
}
