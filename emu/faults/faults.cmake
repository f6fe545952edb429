# emu/faults/faults.cmake — the planted faults of every stage: each stage folder holds its own
# (stages/<stage>/faults.cmake, bench/baselines/<baseline>/faults.cmake), one flashsteps_fault()
# per fault; this file reads them all, in folder order. Whoever includes it defines
# flashsteps_fault() first: emu/faults/CMakeLists.txt builds each fault's suite, book/exercises.cmake
# and tests/stages/add_stage.cmake read the declarations.
get_filename_component(_fs_faults_root "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
file(GLOB _fs_fault_files "${_fs_faults_root}/stages/*/faults.cmake"
     "${_fs_faults_root}/bench/baselines/*/faults.cmake")
list(SORT _fs_fault_files)
foreach(_fs_fault_file IN LISTS _fs_fault_files)
  include("${_fs_fault_file}")
endforeach()
