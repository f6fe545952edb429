// python/src/module_init.cpp — the entry point of one stage's extension module: its name,
// FLASHSTEPS_MODULE_NAME (_gpu_<stage> or _emu_<stage>), is all that differs between the modules;
// stage_module.cpp, compiled once per build, defines what the module offers.
#include <nanobind/nanobind.h>

namespace flashsteps::python {
void define_stage_module(nanobind::module_& m);
}

// NB_MODULE pastes its first argument into PyInit_<name>: one more macro level expands it first.
#define FS_STAGE_MODULE(name, m) NB_MODULE(name, m)

FS_STAGE_MODULE(FLASHSTEPS_MODULE_NAME, m) {
  flashsteps::python::define_stage_module(m);
}
