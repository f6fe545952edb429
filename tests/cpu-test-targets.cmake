# Prints the build's files that the `cpu`-labelled tests run, one file name a line, read from the
# tests themselves: every path under the build folder named in a `cpu` test's command or
# arguments or in its REQUIRED_FILES (a test whose script picks the binary it runs, such as
# tests/exercise.sh, names it there), and the binary of every Catch2 suite whose tests are listed
# only once it is built (catch_discover_tests adds a placeholder test
# "<target>_NOT_BUILT-<hash>" until then).
# tests/debian13-check.sh builds the targets among these names, so a new CPU test needs no
# change there.
#
#   cmake -DBUILD=<build folder> [-DTESTS=<regex>] -P tests/cpu-test-targets.cmake
#
# TESTS: only the tests whose names match the regex (as ctest -R matches them).
#
# It reads the build's CTestTestfile.cmake files with add_test, set_tests_properties and subdirs
# redefined to record what the tests run instead of declaring tests (CTest cannot say: it names a
# test's command only once the command's file exists).
cmake_minimum_required(VERSION 3.25)
if(NOT IS_DIRECTORY "${BUILD}")
  message(FATAL_ERROR "cpu-test-targets: BUILD=${BUILD} is not a build folder")
endif()
file(REAL_PATH "${BUILD}" build)

function(add_test name)
  set(files "")
  foreach(arg IN LISTS ARGN)
    string(REGEX MATCHALL "${build}/[A-Za-z0-9_./+-]+" found "${arg}")
    foreach(f IN LISTS found)
      get_filename_component(f "${f}" NAME)
      list(APPEND files "${f}")
    endforeach()
  endforeach()
  if(DEFINED TESTS AND NOT name MATCHES "${TESTS}")
    return()
  endif()
  if(name MATCHES "^(.+)_NOT_BUILT(-[0-9a-f]+)?$")
    set_property(GLOBAL APPEND PROPERTY fs_always "${CMAKE_MATCH_1}")
  endif()
  set_property(GLOBAL PROPERTY "fs_files_${name}" "${files}")
endfunction()

function(set_tests_properties)
  set(names "")
  set(i 0)
  while(i LESS ARGC AND NOT "${ARGV${i}}" STREQUAL "PROPERTIES")
    if(NOT DEFINED TESTS OR "${ARGV${i}}" MATCHES "${TESTS}")
      list(APPEND names "${ARGV${i}}")
    endif()
    math(EXPR i "${i} + 1")
  endwhile()
  if(NOT names)
    return()
  endif()
  math(EXPR i "${i} + 1")
  while(i LESS ARGC)
    math(EXPR v "${i} + 1")
    if("${ARGV${i}}" STREQUAL "LABELS" AND v LESS ARGC)
      set(labels "${ARGV${v}}")
      if("cpu" IN_LIST labels)
        set_property(GLOBAL APPEND PROPERTY fs_cpu_tests ${names})
      endif()
    elseif("${ARGV${i}}" STREQUAL "REQUIRED_FILES" AND v LESS ARGC)
      foreach(f IN LISTS ARGV${v})
        if(f MATCHES "^${build}/")
          get_filename_component(f "${f}" NAME)
          foreach(name IN LISTS names)
            set_property(GLOBAL APPEND PROPERTY "fs_files_${name}" "${f}")
          endforeach()
        endif()
      endforeach()
    endif()
    math(EXPR i "${i} + 2")
  endwhile()
endfunction()

function(fs_read dir)
  set(fs_dir "${dir}")
  if(EXISTS "${dir}/CTestTestfile.cmake")
    include("${dir}/CTestTestfile.cmake")
  endif()
endfunction()

function(subdirs)
  foreach(d IN LISTS ARGN)
    if(IS_ABSOLUTE "${d}")
      fs_read("${d}")
    else()
      fs_read("${fs_dir}/${d}")
    endif()
  endforeach()
endfunction()

fs_read("${build}")
get_property(out GLOBAL PROPERTY fs_always)
get_property(tests GLOBAL PROPERTY fs_cpu_tests)
foreach(t IN LISTS tests)
  get_property(files GLOBAL PROPERTY "fs_files_${t}")
  list(APPEND out ${files})
endforeach()
list(REMOVE_DUPLICATES out)
list(SORT out)
foreach(f IN LISTS out)
  message("${f}")
endforeach()
