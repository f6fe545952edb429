# tests/stages/add_stage.cmake — adding a stage is adding its folder: a throwaway stage's manifest,
# read after the real ones, reaches the stage list, the table tool's tables and the book's
# fragments, compared with its parent. No CUDA is compiled: under `cmake -P`,
# flashsteps_add_stage() only declares the stage.
#
#   cmake -DROOT=<src> -DBUILD_LIST=<build>/stages.json -DTABLE=<fs_table> -DWORK=<dir>
#         [-DBAD=orphan|runner_clash|untitled|quoted_teaches|kind_mismatch|second_backward_root|
#                kernel_in_launcher]
#         -P add_stage.cmake
#
# BUILD_LIST is the list the configure step wrote; the script's own list must be that one plus
# the new stage. BAD declares instead a stage the tree must refuse — one whose parent does not
# exist, one whose runner another stage has, one with no TITLE, one whose TEACHES holds a quote, a
# forward stage on a backward parent, a second backward stage without a parent, one whose
# launcher.cu declares a kernel — and the declaration must fail (the test that runs it expects
# the message).
cmake_minimum_required(VERSION 3.25)
foreach(var ROOT BUILD_LIST TABLE WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "add_stage.cmake: pass -D${var}=...")
  endif()
endforeach()

include("${ROOT}/stages/flashsteps_add_stage.cmake")
flashsteps_read_stage_list("${BUILD_LIST}" built)

# The stages and the baselines, from their manifests, as the build reads them.
file(GLOB baseline_manifests "${ROOT}/bench/baselines/*/stage.cmake")
foreach(manifest IN LISTS baseline_manifests)
  include("${manifest}")
endforeach()
include("${ROOT}/stages/CMakeLists.txt")

# The forward line of the tree (the backward stages, KIND backward, are a line of their own):
# the stages below build on it.
set(forward_stages "")
foreach(name IN LISTS built_STAGES)
  if(NOT "${built_KIND_${name}}" STREQUAL "backward")
    list(APPEND forward_stages ${name})
  endif()
endforeach()

# A declaration the tree must refuse (each test that runs one expects its message).
list(GET forward_stages -1 last_stage)
if(BAD STREQUAL "orphan")
  flashsteps_add_stage(09_orphan SOURCES kernels.cu launcher.cu PARENT 99_nowhere)
elseif(BAD STREQUAL "runner_clash")
  # 00x_... would be fine; 00_other shares stage00 with 00_scalar.
  flashsteps_add_stage(00_other SOURCES kernels.cu launcher.cu PARENT ${last_stage})
elseif(BAD STREQUAL "untitled")
  # What the stage tables and the runner show comes from the manifest: a stage without it fails.
  flashsteps_add_stage(09_untitled SOURCES kernels.cu launcher.cu PARENT ${last_stage})
elseif(BAD STREQUAL "quoted_teaches")
  flashsteps_add_stage(09_quoted SOURCES kernels.cu launcher.cu PARENT ${last_stage}
                       TITLE "t" TEACHES "a \"quoted\" word")
elseif(BAD STREQUAL "kind_mismatch")
  # Each kind is its own line: a forward stage cannot build on a backward one.
  flashsteps_add_stage(09z_mixed SOURCES kernels.cu launcher.cu PARENT 09a_bwd_scalar
                       TITLE "t" TEACHES "t")
elseif(BAD STREQUAL "second_backward_root")
  flashsteps_add_stage(09z_root SOURCES kernels.cu launcher.cu KIND backward TITLE "t" TEACHES "t")
elseif(BAD STREQUAL "kernel_in_launcher")
  # Only kernels.cu goes through nvcc: a kernel in the launcher, host C++, would be none.
  file(MAKE_DIRECTORY "${WORK}/09z_launcher_kernel")
  file(WRITE "${WORK}/09z_launcher_kernel/launcher.cu" "__global__ void stray(float* x) {}\n")
  flashsteps_add_stage(09z_launcher_kernel DIR "${WORK}/09z_launcher_kernel"
                       SOURCES kernels.cu launcher.cu PARENT ${last_stage} TITLE "t" TEACHES "t")
endif()
if(DEFINED BAD)
  message(FATAL_ERROR "add_stage.cmake: the declaration BAD=${BAD} was accepted")
endif()

# A new stage is a folder with its manifest (nothing is compiled here: tests/stages/new-stage.sh
# builds one in a clone). Its parent is not the last forward stage, so "parent" and "listed before"
# differ.
# Its folder is a copy of its parent's kernels, so its step is empty.
list(GET forward_stages -2 throwaway_parent)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/08_throwaway")
file(COPY "${ROOT}/${built_DIR_${throwaway_parent}}/kernels.cu"
          "${ROOT}/${built_DIR_${throwaway_parent}}/kernels.cuh" DESTINATION "${WORK}/08_throwaway")
file(WRITE "${WORK}/08_throwaway/stage.cmake" "flashsteps_stage(PARENT ${throwaway_parent}
  TITLE \"A throwaway stage\" TEACHES \"nothing; it is a test's\")\n")
include("${WORK}/08_throwaway/stage.cmake")
set(list "${WORK}/stages.json")
flashsteps_write_stage_list("${list}")
flashsteps_read_stage_list("${list}" mine)

function(fail what)
  message(FATAL_ERROR "add_stage.cmake: ${what}")
endfunction()

# The list: the build's stages in the same order with the same parents and folders, then the new
# one.
set(expected ${built_STAGES} 08_throwaway)
if(NOT mine_STAGES STREQUAL expected)
  fail("${list} lists ${mine_STAGES}; expected the build's stages and then 08_throwaway")
endif()
foreach(name IN LISTS built_STAGES)
  foreach(key PARENT DIR RUNNER MEASURED_AS LARGE_STEP)
    if(NOT "${mine_${key}_${name}}" STREQUAL "${built_${key}_${name}}")
      fail("${name}'s ${key} is '${mine_${key}_${name}}' here but '${built_${key}_${name}}' in "
           "the build's ${BUILD_LIST}")
    endif()
  endforeach()
endforeach()
if(NOT "${mine_PARENT_08_throwaway}" STREQUAL "${throwaway_parent}")
  fail("08_throwaway's parent is '${mine_PARENT_08_throwaway}', not ${throwaway_parent}")
endif()

# The new stage's chapter needs its run box and two exercises, one line each, from planted faults
# of that stage (book/exercises.cmake): the book's chapters and faults, plus the new stage's.
file(COPY "${ROOT}/book/chapters" DESTINATION "${WORK}")
file(WRITE "${WORK}/chapters/stage_08_throwaway.md" "# Stage 08 {#stage08}

\\include{doc} run_08_throwaway.md

# Exercises {#stage08_exercises}

\\include{doc} exercise_08_first.md

\\include{doc} exercise_08_second.md
")
file(WRITE "${WORK}/faults.cmake" "include(\"${ROOT}/emu/faults/faults.cmake\")\n")
foreach(id 08_first 08_second)
  file(APPEND "${WORK}/faults.cmake"
       "flashsteps_fault(${id} STAGE 08_throwaway FROM [=[a = 1;]=] TO [=[a = 2;]=]
  BREAKS \"${id} breaks it\" EXPECT \"heads: FAIL\" TESTS \"ragged tails*\")\n")
endforeach()

# The book's list: generate.cmake runs the table tool on the committed run with this list and
# fails unless every stage of it got its fragments.
execute_process(COMMAND "${CMAKE_COMMAND}" "-DTABLE=${TABLE}" "-DDATA_DIR=${ROOT}/book/data"
                        "-DGEN_DIR=${WORK}/generated" "-DSTAGE_LIST=${list}"
                        "-DCHAPTERS=${WORK}/chapters" "-DFAULTS=${WORK}/faults.cmake"
                        -P "${ROOT}/book/generate.cmake"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  fail("book/generate.cmake failed with the extra stage (${rc})")
endif()

function(expect file text)
  file(READ "${file}" body)
  string(FIND "${body}" "${text}" at)
  if(at EQUAL -1)
    fail("${file} does not contain '${text}'")
  endif()
endfunction()
set(gen "${WORK}/generated")
# The new stage's timing table compares it with its parent, and so does its profile diff — or,
# when the committed run (book/data/CURRENT) has no time for the parent, with the nearest ancestor
# it has, and the table names the parent it skipped.
file(STRINGS "${ROOT}/book/data/CURRENT" current_run LIMIT_COUNT 1)
set(compared "")
foreach(a IN LISTS mine_ANCESTORS_08_throwaway)  # the registry's walk, nearest first
  set(file_name ${a})
  if(NOT "${mine_MEASURED_AS_${a}}" STREQUAL "")
    set(file_name ${mine_MEASURED_AS_${a}})
  endif()
  if(EXISTS "${ROOT}/book/data/${current_run}/bench_${file_name}.json")
    set(compared ${a})
    break()
  endif()
endforeach()
if(compared STREQUAL "")
  fail("no ancestor of 08_throwaway has a time in book/data/${current_run}")
endif()
expect("${gen}/table_08_throwaway.md" "vs `${compared}`")
expect("${gen}/ncu_diff_08_throwaway.md" "`${compared}` against `08_throwaway`")
if(NOT compared STREQUAL throwaway_parent)
  expect("${gen}/table_08_throwaway.md" "it has no time for `${throwaway_parent}`")
endif()
# The book's lists of the stages: Part II's pages and the front page's table have it.
expect("${gen}/stage_pages.md" "\\subpage stage08\n")
expect("${gen}/stage_table.md" "| `08_throwaway` | `${throwaway_parent}` | \\ref stage08 | nothing")
# Its step size against its parent (the same kernels), and its status (no run has measured it).
expect("${gen}/step_08_throwaway.md" "0 code lines added, 0 removed")
expect("${gen}/status_08_throwaway.md" "not yet measured on a GPU")
# Its box runs its emulated runner; its exercises show its faults' change and answer.
expect("${gen}/run_08_throwaway.md" "build/cpu/stages/stage08 --emulate")
expect("${gen}/exercise_08_first.md" "    - a = 1;\n    + a = 2;")
expect("${gen}/exercise_08_second.md" "08_second breaks it")

# The table tool's lists: the comparison table and README's status table have its row.
foreach(cmd "table;${ROOT}/book/data;--format;markdown" "status;${ROOT}/book/data")
  execute_process(COMMAND "${TABLE}" ${cmd} --stage-list "${list}"
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  list(GET cmd 0 sub)
  if(NOT rc EQUAL 0)
    fail("fs_table ${sub} --stage-list ${list} failed (${rc})")
  endif()
  string(FIND "${out}" "| `08_throwaway` |" at)
  if(at EQUAL -1)
    fail("fs_table ${sub} --stage-list ${list} has no row for 08_throwaway")
  endif()
endforeach()
message(STATUS "add_stage.cmake: 08_throwaway (parent ${throwaway_parent}) is in the list, the book's "
               "fragments and fs_table's tables")
