# emu/exercises/exercises.cmake — the exercises of every stage that ask the reader to write the
# step's lesson: each stage folder holds its own (stages/<stage>/exercises.cmake), one
# flashsteps_exercise() per exercise; this file reads them all, in folder order. Whoever includes it
# defines flashsteps_exercise() first: emu/exercises/CMakeLists.txt builds each exercise,
# book/exercises.cmake writes its page.
get_filename_component(_fs_exercises_root "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
file(GLOB _fs_exercise_files "${_fs_exercises_root}/stages/*/exercises.cmake")
list(SORT _fs_exercise_files)
foreach(_fs_exercise_file IN LISTS _fs_exercise_files)
  include("${_fs_exercise_file}")
endforeach()
