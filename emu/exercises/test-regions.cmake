# emu/exercises/test-regions.cmake — CTest emu.exercise_regions: regions.cmake's cut and put-back
# on small texts (cmake -P; no build). One region gives the markers the exercises have always had;
# several regions are each cut and put back; a region that occurs twice, an unequal number of
# regions, regions out of order and overlapping regions are refused with a message that says so.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/regions.cmake")

set(failures 0)
function(check what got want)
  if(NOT got STREQUAL want)
    message(SEND_ERROR "${what}:\n--- got ---\n${got}\n--- want ---\n${want}")
  endif()
endfunction()
function(refused what text solution stub want)
  fsemu_exercise_cut("${text}" "${solution}" "${stub}" ex "a task" copy error)
  if(NOT error MATCHES "${want}")
    message(SEND_ERROR "${what}: want an error matching '${want}', got '${error}'")
  endif()
  check("${what}: no copy" "${copy}" "")
endfunction()

set(text "int f() {\n  int a = 1;  // [a]\n  int b = 2;\n  return a + b;\n}\n")

# One region: the markers as before, the task on the begin line; the solution puts it back.
fsemu_exercise_cut("${text}" "  int a = 1;  // [a]" "  int a = 0;" ex "write a, then b" copy error)
check("one region: no error" "${error}" "")
check("one region: the copy" "${copy}" "int f() {
  // EXERCISE ex begin: write a, then b
  int a = 0;
  // EXERCISE ex end (tests/exercise.sh ex builds this file and judges it)
  int b = 2;
  return a + b;
}
")
fsemu_exercise_solve("${copy}" ex "  int a = 1;  // [a]" solved)
check("one region: put back" "${solved}" "${text}")

# A long task is wrapped at 100 columns.
string(REPEAT "word " 30 long)
fsemu_exercise_cut("${text}" "  int b = 2;" "  int b = 0;" ex "${long}" copy error)
string(REGEX MATCHALL "[^\n]+" lines "${copy}")
foreach(line IN LISTS lines)
  string(LENGTH "${line}" n)
  if(n GREATER 100)
    message(SEND_ERROR "a long task: a line of ${n} columns: ${line}")
  endif()
endforeach()

# Two regions, two lines apart: each stub between its markers, the task at the first.
fsemu_exercise_cut("${text}" "  int a = 1;  // [a]\n...\n  return a + b;"
                   "  int a = 0;\n...\n  return 0;  // [b]" ex "write a, then b" copy error)
check("two regions: no error" "${error}" "")
check("two regions: the copy" "${copy}" "int f() {
  // EXERCISE ex begin (1 of 2): write a, then b
  int a = 0;
  // EXERCISE ex end (1 of 2; tests/exercise.sh ex builds this file and judges it)
  int b = 2;
  // EXERCISE ex begin (2 of 2; the task is at 1 of 2)
  return 0;  // [b]
  // EXERCISE ex end (2 of 2; tests/exercise.sh ex builds this file and judges it)
}
")
fsemu_exercise_solve("${copy}" ex "  int a = 1;  // [a]\n...\n  return a + b;" solved)
check("two regions: put back" "${solved}" "${text}")

# Refusals.
refused("a region that occurs twice" "int a;\nint a;\n" "int a;" "int b;" "occurs 2 times")
refused("a region that is not whole lines" "${text}" "  int a = 1;" "  int a = 0;"
        "occurs 0 times")
refused("fewer stub regions" "${text}" "  int b = 2;\n...\n  return a + b;" "  int b = 0;"
        "SOLUTION has 2 region\\(s\\) and STUB 1")
refused("regions out of order" "${text}" "  return a + b;\n...\n  int b = 2;"
        "  return 0;\n...\n  int b = 0;" "in the order they appear")
refused("overlapping regions" "${text}" "  int b = 2;\n  return a + b;\n...\n  return a + b;"
        "  int b = 0;\n...\n  return 0;" "overlaps an earlier one")
refused("the stub is the solution" "${text}" "  int b = 2;" "  int b = 2;" "STUB is the SOLUTION")
# An anchor an exercise cuts its region by: its offset (10 + 21 characters of the two lines before
# it), or why not.
fsemu_exercise_anchor("${text}" "  int b = 2;\n" at error)
check("an anchor: its offset" "${at}" "31")
check("an anchor: no error" "${error}" "")
fsemu_exercise_anchor("int a;\nint a;\n" "int a;" at error)
if(NOT error MATCHES "more than once")
  message(SEND_ERROR "an anchor twice: want 'more than once', got '${error}'")
endif()
fsemu_exercise_anchor("${text}" "  int c" at error)
if(NOT error MATCHES "occur 0 times")
  message(SEND_ERROR "an absent anchor: want 'occur 0 times', got '${error}'")
endif()
message(STATUS "emu.exercise_regions: checked")
