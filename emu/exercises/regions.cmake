# emu/exercises/regions.cmake — how an exercise's lines are cut out of a copy of a stage's file and
# put back: string functions only, included by emu/exercises/CMakeLists.txt (the build) and by
# emu/exercises/test-regions.cmake (CTest emu.exercise_regions, which tests them on small texts).
#
# An exercise's SOLUTION and STUB hold one region each, or several: then the regions are separated
# by a line that is exactly `...`, SOLUTION's regions in the order they appear in the file, and STUB
# holds as many, the k-th replacing the k-th (a twin of the lesson elsewhere in the file is cut out
# with it, so that the reader cannot copy it). Each region of SOLUTION is whole lines of the file
# that occur exactly once. In the copy each stub stands between two marker lines, with the
# region's indentation:
#
#   // EXERCISE <id> begin: <task, wrapped at 100 columns>        one region
#   <stub>
#   // EXERCISE <id> end (tests/exercise.sh <id> builds this file and judges it)
#
#   // EXERCISE <id> begin (1 of n): <task>                         several: the task at the first
#   // EXERCISE <id> begin (k of n; the task is at 1 of n)
#   // EXERCISE <id> end (k of n; tests/exercise.sh <id> builds this file and judges it)

# The regions of `text` (SOLUTION or STUB) as <prefix>_N and <prefix>_1 .. <prefix>_N in the
# caller's scope (not a list: code holds ';' and '[').
function(fsemu_exercise_split text prefix)
  set(rest "${text}")
  set(n 1)
  string(FIND "${rest}" "\n...\n" at)
  while(NOT at EQUAL -1)
    string(SUBSTRING "${rest}" 0 ${at} part)
    set(${prefix}_${n} "${part}" PARENT_SCOPE)
    math(EXPR at "${at} + 5")
    string(SUBSTRING "${rest}" ${at} -1 rest)
    math(EXPR n "${n} + 1")
    string(FIND "${rest}" "\n...\n" at)
  endwhile()
  set(${prefix}_${n} "${rest}" PARENT_SCOPE)
  set(${prefix}_N ${n} PARENT_SCOPE)
endfunction()

# fsemu_exercise_anchor(<text> <anchor> <out> <error>): where an exercise that is cut from its
# stage's file by the file's own lines (07d's, 08a's) finds one of them: <out> the offset of
# <anchor> in <text>, <error> empty, or why not when <anchor> does not occur exactly once.
function(fsemu_exercise_anchor text anchor out error)
  string(FIND "${text}" "${anchor}" first)
  string(FIND "${text}" "${anchor}" last REVERSE)
  set(${out} ${first} PARENT_SCOPE)
  set(${error} "" PARENT_SCOPE)
  if(first EQUAL -1)
    set(${error} "these lines occur 0 times, not once:${anchor}" PARENT_SCOPE)
  elseif(NOT first EQUAL last)
    set(${error} "these lines occur more than once:${anchor}" PARENT_SCOPE)
  endif()
endfunction()

# The marker line that opens region k of n, with the task wrapped as comment lines of at most 100
# columns (n = 1: the one region's, as before regions were several).
function(fsemu_exercise_begin indent id task k n out)
  if(n EQUAL 1)
    set(line "${indent}// EXERCISE ${id} begin:")
  elseif(k EQUAL 1)
    set(line "${indent}// EXERCISE ${id} begin (1 of ${n}):")
  else()
    set(${out} "${indent}// EXERCISE ${id} begin (${k} of ${n}; the task is at 1 of ${n})"
        PARENT_SCOPE)
    return()
  endif()
  # Brackets stand aside while the task is a list: CMake keeps a '[' .. ']' span one element.
  string(ASCII 1 lb)
  string(ASCII 2 rb)
  string(REPLACE "[" "${lb}" words "${task}")
  string(REPLACE "]" "${rb}" words "${words}")
  string(REPLACE " " ";" words "${words}")
  set(begin "")
  foreach(word IN LISTS words)
    string(LENGTH "${line} ${word}" len)
    if(len GREATER 100)
      string(APPEND begin "${line}\n")
      set(line "${indent}//  ${word}")
    else()
      set(line "${line} ${word}")
    endif()
  endforeach()
  string(APPEND begin "${line}")
  string(REPLACE "${lb}" "[" begin "${begin}")
  string(REPLACE "${rb}" "]" begin "${begin}")
  set(${out} "${begin}" PARENT_SCOPE)
endfunction()

# The copy of a stage's file `text` with each region of `solution` replaced by the marked region
# of `stub`, in `out`; `error_out` is empty, or says why the exercise is not well formed (a
# region that does not occur exactly once as whole lines, a different number of regions in the
# two, regions out of the file's order, a stub that is the solution).
function(fsemu_exercise_cut text solution stub id task out error_out)
  set(${out} "" PARENT_SCOPE)
  set(${error_out} "" PARENT_SCOPE)
  if(stub STREQUAL solution)
    set(${error_out} "STUB is the SOLUTION" PARENT_SCOPE)
    return()
  endif()
  fsemu_exercise_split("${solution}" sol)
  fsemu_exercise_split("${stub}" stb)
  if(NOT sol_N EQUAL stb_N)
    string(CONCAT msg "SOLUTION has ${sol_N} region(s) and STUB ${stb_N} (regions are "
                "separated by a line '...'): the k-th region of STUB replaces the k-th of SOLUTION")
    set(${error_out} "${msg}" PARENT_SCOPE)
    return()
  endif()
  set(copy "\n${text}\n")
  foreach(k RANGE 1 ${sol_N})
    set(region "${sol_${k}}")
    # Each region occurs once as whole lines of the file (counted in the file, not the copy).
    # Occurrences may share their newline (two equal lines in a row count twice).
    set(count 0)
    set(rest "\n${text}\n")
    string(FIND "${rest}" "\n${region}\n" at)
    while(NOT at EQUAL -1)
      math(EXPR count "${count} + 1")
      math(EXPR at "${at} + 1")
      string(SUBSTRING "${rest}" ${at} -1 rest)
      string(FIND "${rest}" "\n${region}\n" at)
    endwhile()
    if(region STREQUAL "" OR NOT count EQUAL 1)
      string(CONCAT msg "its SOLUTION's region ${k} occurs ${count} times in the file as whole "
                  "lines, not once:\n${region}")
      set(${error_out} "${msg}" PARENT_SCOPE)
      return()
    endif()
    string(REGEX MATCH "^ +" indent "${region}")  # the markers take the region's indentation
    fsemu_exercise_begin("${indent}" "${id}" "${task}" ${k} ${sol_N} begin)
    if(sol_N EQUAL 1)
      set(where "")
    else()
      set(where "${k} of ${sol_N}; ")
    endif()
    string(CONCAT end "${indent}// EXERCISE ${id} end (${where}tests/exercise.sh ${id} builds "
                  "this file and judges it)")
    string(FIND "${copy}" "\n${region}\n" at)
    if(at EQUAL -1)
      set(${error_out} "its SOLUTION's region ${k} overlaps an earlier one:\n${region}" PARENT_SCOPE)
      return()
    endif()
    string(REPLACE "\n${region}\n" "\n${begin}\n${stb_${k}}\n${end}\n" copy "${copy}")
  endforeach()
  string(LENGTH "${copy}" len)
  math(EXPR len "${len} - 2")
  string(SUBSTRING "${copy}" 1 ${len} copy)
  # The solution is the file: the copy with the regions put back gives it byte for byte.
  fsemu_exercise_solve("${copy}" "${id}" "${solution}" solved)
  if(NOT solved STREQUAL text)
    string(CONCAT msg "the copy with SOLUTION put back is not the file (are its regions in the "
                "order they appear in the file?)")
    set(${error_out} "${msg}" PARENT_SCOPE)
    return()
  endif()
  set(${out} "${copy}" PARENT_SCOPE)
endfunction()

# The copy with each marked region, markers included, replaced by the k-th region of `solution`.
function(fsemu_exercise_solve copy id solution out)
  fsemu_exercise_split("${solution}" sol)
  set(done "")
  set(rest "${copy}")
  foreach(k RANGE 1 ${sol_N})
    string(FIND "${rest}" "// EXERCISE ${id} begin" b)
    if(b EQUAL -1)
      break()
    endif()
    string(SUBSTRING "${rest}" 0 ${b} head)
    string(SUBSTRING "${rest}" ${b} -1 rest)
    string(FIND "${rest}" "// EXERCISE ${id} end " e)
    if(e EQUAL -1)
      break()
    endif()
    string(SUBSTRING "${rest}" ${e} -1 rest)
    string(FIND "${rest}" "\n" nl)
    math(EXPR nl "${nl} + 1")
    string(SUBSTRING "${rest}" ${nl} -1 rest)
    string(REGEX REPLACE " +$" "" head "${head}")  # the marker line's indentation
    string(APPEND done "${head}${sol_${k}}\n")
  endforeach()
  set(${out} "${done}${rest}" PARENT_SCOPE)
endfunction()
