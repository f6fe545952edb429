// tests/gpu/stage_entry.cpp — flashsteps_new_stage(), linked into every stage's shared library
// (stages/flashsteps_add_stage.cmake): the C entry point fs_gpu_suite finds with dlsym.
#include "stage_entry.hpp"

#include "flashsteps/stage.hpp"

extern "C" flashsteps::Stage* flashsteps_new_stage() {
  return flashsteps::make_stage().release();
}
