# Checks that the project passes its Catch2 test binaries only options that Catch2 2 (2.13,
# Debian 12) and Catch2 3 (Debian 13, Ubuntu 24.04) both accept: the README supports both, and an
# option that one of them no longer knows fails every test that passes it there (Catch2 3 dropped
# the NoTests warning; the exercise tests passed it until issue 38).
#
#   cmake -DROOT=<source tree> -P tests/catch2-options.cmake      (CTest scripts.catch2_options)
#
# It reads every script and CMake file of the tree (the folders below: *.sh, *.py, *.cmake,
# CMakeLists.txt, .ci/run) and fails, naming the file, the line and the version that lacks it, on
#  - a --warn whose value is not NoAssertions, the one warning both versions know (Catch2 2 also
#    has NoTests; Catch2 3 has UnmatchedTestSpec and InfiniteGenerators instead);
#  - an option that exists in only one of them: Catch2 2's --list-test-names-only and
#    --use-colour (3 lists with --list-tests and colours with --colour-mode), Catch2 3's
#    --colour-mode, --allow-running-no-tests, --skip-benchmarks, --shard-count, --shard-index and
#    --list-listeners.
# Both versions' docs/command-line.md are the source of these lists. Catch2's own CMake module
# (catch_discover_tests) passes its version's listing options itself: it is not in this tree.
# Prints "catch2-options: PASS" when nothing is found.
cmake_minimum_required(VERSION 3.25)
if(NOT IS_DIRECTORY "${ROOT}")
  message(FATAL_ERROR "catch2-options: ROOT=${ROOT} is not the source tree")
endif()

set(only_v2 --list-test-names-only --use-colour)
set(only_v3 --colour-mode --allow-running-no-tests --skip-benchmarks --shard-count --shard-index
            --list-listeners)
set(both_warnings NoAssertions)

set(files "")
foreach(dir tests bench emu stages common python examples book)
  file(GLOB_RECURSE found LIST_DIRECTORIES false "${ROOT}/${dir}/*.sh" "${ROOT}/${dir}/*.py"
       "${ROOT}/${dir}/*.cmake" "${ROOT}/${dir}/CMakeLists.txt")
  list(APPEND files ${found})
endforeach()
list(APPEND files "${ROOT}/CMakeLists.txt" "${ROOT}/.ci/run")
# This file names the options it looks for.
list(REMOVE_ITEM files "${CMAKE_CURRENT_LIST_FILE}")
list(FILTER files EXCLUDE REGEX "/book/data/")

set(bad "")
set(scanned 0)
foreach(f IN LISTS files)
  if(NOT EXISTS "${f}")
    continue()
  endif()
  math(EXPR scanned "${scanned} + 1")
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  file(STRINGS "${f}" lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    # --warn VALUE or --warn=VALUE, the value bare or quoted.
    string(REGEX MATCHALL "--warn[ =\"']+[A-Za-z]+" warns "${line}")
    foreach(w IN LISTS warns)
      string(REGEX REPLACE "^--warn[ =\"']+" "" value "${w}")
      if(NOT value IN_LIST both_warnings)
        list(APPEND bad "${rel}:${n}: --warn ${value}: Catch2 2 and 3 share only --warn ${both_warnings}")
      endif()
    endforeach()
    foreach(version 2 3)
      foreach(opt IN LISTS only_v${version})
        string(REGEX MATCH "(^|[^A-Za-z0-9_-])${opt}([^A-Za-z0-9_-]|$)" hit "${line}")
        if(hit)
          if(version EQUAL 2)
            set(other 3)
          else()
            set(other 2)
          endif()
          list(APPEND bad "${rel}:${n}: ${opt}: only Catch2 ${version} has it, Catch2 ${other} refuses it")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

if(scanned LESS 20)
  message(FATAL_ERROR "catch2-options: found only ${scanned} scripts under ${ROOT}: not the source tree?")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "catch2-options: FAIL: Catch2 options that Catch2 2 and 3 do not both accept:\n  ${text}")
endif()
message("catch2-options: PASS (${scanned} scripts and CMake files: every Catch2 option they pass is one Catch2 2 and 3 both accept)")
