# stages/stage-tree.cmake — writes the stage tree of a source tree without configuring a build:
# under `cmake -P`, flashsteps_add_stage() only declares each stage and baseline of their manifests
# (stages/*/stage.cmake, bench/baselines/*/stage.cmake), and the list is written as the build
# writes <build>/stages.json (flashsteps_write_stage_list).
#
#   cmake -DOUT=<file> [-DROOT=<source tree>] -P stages/stage-tree.cmake
#
# For the scripts that read a revision's sources rather than a build (tests/kernel-identity.sh,
# bench/python-gpu.sh).
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED OUT)
  message(FATAL_ERROR "stage-tree.cmake: pass -DOUT=<file>")
endif()
if(NOT DEFINED ROOT)
  get_filename_component(ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
include("${ROOT}/stages/flashsteps_add_stage.cmake")
include("${ROOT}/stages/CMakeLists.txt")
file(GLOB baseline_manifests "${ROOT}/bench/baselines/*/stage.cmake")
list(SORT baseline_manifests)
foreach(manifest IN LISTS baseline_manifests)
  include("${manifest}")
endforeach()
flashsteps_write_stage_list("${OUT}")
