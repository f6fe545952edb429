// tests/cpu/stage_launchers.cpp — the launchers of stages 01, 02 and 07a to 07d inside test_cpu,
// so that the refusals their launch() and supports() make before any CUDA call are tested without a
// GPU (test_stage_launch.cpp).
//
// Each launcher defines flashsteps::make_stage(), the one function a stage binary gets from its
// stage library; renaming it per include lets one binary hold both stages. Their kernels come from
// the stage libraries that test_cpu links: nothing here calls make_stage(), so the libraries' own
// launcher objects are never pulled in. Each launcher's name and title are its manifest's, as in
// its own library (flashsteps_stage_target): the build writes them all to one header.
#include "flashsteps_stage_manifests.hpp"

#define make_stage make_stage_01_tiled
#define FLASHSTEPS_STAGE_NAME FLASHSTEPS_MANIFEST_NAME_01_tiled
#define FLASHSTEPS_STAGE_TITLE FLASHSTEPS_MANIFEST_TITLE_01_tiled
#include "01_tiled/launcher.cu"
#undef make_stage
#undef FLASHSTEPS_STAGE_NAME
#undef FLASHSTEPS_STAGE_TITLE

#define make_stage make_stage_02_wmma
#define FLASHSTEPS_STAGE_NAME FLASHSTEPS_MANIFEST_NAME_02_wmma
#define FLASHSTEPS_STAGE_TITLE FLASHSTEPS_MANIFEST_TITLE_02_wmma
#include "02_wmma/launcher.cu"
#undef make_stage
#undef FLASHSTEPS_STAGE_NAME
#undef FLASHSTEPS_STAGE_TITLE

#define make_stage make_stage_07a_wgmma
#define FLASHSTEPS_STAGE_NAME FLASHSTEPS_MANIFEST_NAME_07a_wgmma
#define FLASHSTEPS_STAGE_TITLE FLASHSTEPS_MANIFEST_TITLE_07a_wgmma
#include "07a_wgmma/launcher.cu"
#undef make_stage
#undef FLASHSTEPS_STAGE_NAME
#undef FLASHSTEPS_STAGE_TITLE

#define make_stage make_stage_07b_tma
#define FLASHSTEPS_STAGE_NAME FLASHSTEPS_MANIFEST_NAME_07b_tma
#define FLASHSTEPS_STAGE_TITLE FLASHSTEPS_MANIFEST_TITLE_07b_tma
#include "07b_tma/launcher.cu"
#undef make_stage
#undef FLASHSTEPS_STAGE_NAME
#undef FLASHSTEPS_STAGE_TITLE

#define make_stage make_stage_07c_roles
#define FLASHSTEPS_STAGE_NAME FLASHSTEPS_MANIFEST_NAME_07c_roles
#define FLASHSTEPS_STAGE_TITLE FLASHSTEPS_MANIFEST_TITLE_07c_roles
#include "07c_roles/launcher.cu"
#undef make_stage
#undef FLASHSTEPS_STAGE_NAME
#undef FLASHSTEPS_STAGE_TITLE

#define make_stage make_stage_07d_overlap
#define FLASHSTEPS_STAGE_NAME FLASHSTEPS_MANIFEST_NAME_07d_overlap
#define FLASHSTEPS_STAGE_TITLE FLASHSTEPS_MANIFEST_TITLE_07d_overlap
#include "07d_overlap/launcher.cu"
#undef make_stage
#undef FLASHSTEPS_STAGE_NAME
#undef FLASHSTEPS_STAGE_TITLE
