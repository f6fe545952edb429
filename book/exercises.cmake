# book/exercises.cmake — every stage chapter's "Run it here" box and its exercises, made from the
# stage tree (stages.json) and the planted faults (emu/faults/faults.cmake), so that neither can
# drift from what the build makes.
#
#   cmake -DSTAGE_LIST=<build>/stages.json -DCHAPTERS=<src>/book/chapters
#         -DFAULTS=<src>/emu/faults/faults.cmake [-DGEN_DIR=<dir>] [-DBUILD_DIR=<build>]
#         -P exercises.cmake
#
# A stage's chapter is the one its manifest names (default book/chapters/stage_<stage>.md). It shows its box and its exercises with
# one line each, which this script reads (and nothing else of the chapter):
#
#   \include{doc} run_<stage>.md              the "Run it here" box (exactly once)
#   \include{doc} exercise_<fault id>.md      one exercise from the planted fault <fault id>
#   \include{doc} exercise_<exercise id>.md   one exercise that asks the reader to write the step's
#                                             lesson (stages/<stage>/exercises.cmake)
#
# It fails (naming the chapter and the line) when a stage of the tree has no chapter, no box or
# fewer than two exercises from planted faults, when an exercise names a fault or exercise that is
# not declared or that belongs to another stage, or when the chapter leaves out an exercise its
# stage declares (emu/exercises/exercises.cmake reads them all). With GEN_DIR it writes the fragments the lines include:
#   run_<stage>.md       the stage's emulated run (its runner with --emulate on a ragged causal
#                        shape; --layout too where its kernels address tensor-core fragments lane by
#                        lane), its emulated GPU suite, and which preset each command needs;
#   exercise_<id>.md     the change (the fault's FROM and TO as a diff of its file), what to
#                        predict, the commands that show the answer, and the answer (the fault's
#                        BREAKS, the test cases that show it and the evidence the suite prints,
#                        EXPECT) folded in <details>; for a write-it exercise: the task, the
#                        command (tests/exercise.sh) and the stage's own lines folded in <details>.
# With BUILD_DIR (the CTest book.exercises, after the build) it also checks that every binary the
# commands name exists in that build.
#
# The same file is included by book/CMakeLists.txt for flashsteps_run_it_here_args(), so the CTest
# that runs each box's command (book.run_it_here.<stage>) runs exactly what the box shows.

# The emulated run every box shows: two heads, a causal mask, Sq != Skv, both ragged (129 and 300
# are not multiples of any tile), small enough to take seconds on the CPU.
set(FLASHSTEPS_RUN_IT_HERE_SHAPE --batch 1 --heads 2 --seq 129 --seq-kv 300 --dim 64 --causal)

# Does the stage's kernel address tensor-core fragments lane by lane (mma.sync m16n8k16 or wgmma
# through ptx.cuh)? Then its runner's --layout is part of its lesson.
function(flashsteps_book_has_layout stage_dir out)
  set(found FALSE)
  file(GLOB sources "${stage_dir}/*.cu" "${stage_dir}/*.cuh")
  foreach(src IN LISTS sources)
    file(READ "${src}" text)
    if(text MATCHES "ptx::(mma_m16n8k16|wgmma_)")
      set(found TRUE)
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

if(NOT CMAKE_SCRIPT_MODE_FILE OR NOT CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  return()  # included for the functions above
endif()

cmake_minimum_required(VERSION 3.25)
foreach(var STAGE_LIST CHAPTERS FAULTS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "exercises.cmake: pass -D${var}=...")
  endif()
endforeach()
cmake_path(GET CMAKE_CURRENT_LIST_DIR PARENT_PATH root)
include("${root}/stages/flashsteps_add_stage.cmake")
flashsteps_read_stage_list("${STAGE_LIST}" list)

# The planted faults, as faults.cmake declares them (the same calls emu/faults/CMakeLists.txt
# builds; here they are only recorded).
set(fault_ids "")
function(flashsteps_fault id)
  cmake_parse_arguments(PARSE_ARGV 1 F "" "STAGE;FILE;FROM;TO;BREAKS;EXPECT;TESTS" "")
  if(NOT F_FILE)
    set(F_FILE kernels.cu)
  endif()
  foreach(key STAGE FILE FROM TO BREAKS EXPECT TESTS)
    set_property(GLOBAL PROPERTY "FS_FAULT_${id}_${key}" "${F_${key}}")
  endforeach()
  set_property(GLOBAL APPEND PROPERTY FS_FAULT_IDS ${id})
endfunction()
include("${FAULTS}")
get_property(fault_ids GLOBAL PROPERTY FS_FAULT_IDS)
if(NOT fault_ids)
  message(FATAL_ERROR "exercises.cmake: ${FAULTS} declares no fault")
endif()

# The exercises that ask the reader to write a step's lesson, as the stage folders declare them
# (emu/exercises/CMakeLists.txt builds them).
function(flashsteps_exercise id)
  cmake_parse_arguments(PARSE_ARGV 1 E "" "STAGE;FILE;TASK;SOLUTION;STUB;EXPECT;TESTS;STUB_OPT"
                        "")
  if(NOT E_FILE)
    set(E_FILE kernels.cu)
  endif()
  foreach(key STAGE FILE TASK SOLUTION STUB TESTS)
    set_property(GLOBAL PROPERTY "FS_EXERCISE_${id}_${key}" "${E_${key}}")
  endforeach()
  set_property(GLOBAL APPEND PROPERTY FS_EXERCISE_IDS ${id})
  set_property(GLOBAL APPEND PROPERTY FS_EXERCISES_OF_${E_STAGE} ${id})
endfunction()
# fsemu_exercise_split(): an exercise's regions; fsemu_exercise_anchor(), which stages' exercises
# call: included first.
include("${root}/emu/exercises/regions.cmake")
include("${root}/emu/exercises/exercises.cmake")
get_property(write_ids GLOBAL PROPERTY FS_EXERCISE_IDS)

set(errors "")
function(fail)
  string(JOIN "" what ${ARGV})
  set(errors "${errors}\n  ${what}" PARENT_SCOPE)
endfunction()

# The change as a diff: unchanged lines with two spaces, the changed one as - and +.
function(fault_diff id out)
  get_property(from GLOBAL PROPERTY FS_FAULT_${id}_FROM)
  get_property(to GLOBAL PROPERTY FS_FAULT_${id}_TO)
  foreach(side from to)
    string(REPLACE ";" "<semicolon>" t "${${side}}")
    string(REPLACE "\n" ";" lines_${side} "${t}")
  endforeach()
  list(LENGTH lines_from n)
  math(EXPR last "${n} - 1")
  set(result "")
  foreach(i RANGE ${last})
    list(GET lines_from ${i} a)
    list(GET lines_to ${i} b)
    string(REPLACE "<semicolon>" ";" a "${a}")
    string(REPLACE "<semicolon>" ";" b "${b}")
    if(a STREQUAL b)
      string(APPEND result "      ${a}\n")
    else()
      string(APPEND result "    - ${a}\n    + ${b}\n")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

set(fragments "")
foreach(stage IN LISTS list_STAGES)
  # The chapter the stage's manifest names (stages.json): one in book/chapters is looked up in
  # CHAPTERS (a test may pass a copy), one in the stage's own folder where it is.
  set(chapter "${root}/${list_CHAPTER_${stage}}")
  if(list_CHAPTER_${stage} MATCHES "^book/chapters/")
    get_filename_component(chapter "${list_CHAPTER_${stage}}" NAME)
    set(chapter "${CHAPTERS}/${chapter}")
  endif()
  set(dir "${root}/${list_DIR_${stage}}")
  set(runner "${list_RUNNER_${stage}}")  # as the build names it (stages.json)
  if(NOT EXISTS "${chapter}")
    fail("stage ${stage}: no chapter ${chapter}")
    continue()
  endif()
  # The include lines only (a whole chapter as a CMake list would merge lines at any '[').
  file(READ "${chapter}" text)
  string(REGEX MATCHALL "\n\\\\include{doc} (run|exercise)_[A-Za-z0-9_]+\\.md *" lines
         "\n${text}")
  list(TRANSFORM lines STRIP)
  set(boxes 0)
  set(exercises "")
  set(writes "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^\\\\include{doc} run_([A-Za-z0-9_]+)\\.md *$")
      if(NOT CMAKE_MATCH_1 STREQUAL stage)
        fail("${chapter}: '${line}' is another stage's box (this chapter is ${stage}'s)")
      endif()
      math(EXPR boxes "${boxes} + 1")
    elseif(line MATCHES "^\\\\include{doc} exercise_([A-Za-z0-9_]+)\\.md *$")
      set(id "${CMAKE_MATCH_1}")
      if(id IN_LIST write_ids)
        get_property(write_stage GLOBAL PROPERTY FS_EXERCISE_${id}_STAGE)
        if(NOT write_stage STREQUAL stage)
          fail("${chapter}: '${line}': exercise ${id} is ${write_stage}'s, not ${stage}'s")
          continue()
        endif()
        list(APPEND writes ${id})
        # What the reader sees before judging (the task, the stub) names no test case that
        # shows the failure: finding which fails is the reader's part.
        get_property(tests GLOBAL PROPERTY FS_EXERCISE_${id}_TESTS)
        get_property(task GLOBAL PROPERTY FS_EXERCISE_${id}_TASK)
        get_property(stub GLOBAL PROPERTY FS_EXERCISE_${id}_STUB)
        string(REPLACE "," ";" cases "${tests}")
        foreach(case IN LISTS cases)
          string(STRIP "${case}" case)
          string(REGEX REPLACE "^\\*|\\*$" "" case "${case}")
          string(TOLOWER "${task} ${stub}" seen)
          string(TOLOWER "${case}" case)
          string(FIND "${seen}" "${case}" at)
          if(NOT case STREQUAL "" AND NOT at EQUAL -1)
            fail("exercise ${id}: its TASK or STUB names the test case '${case}' that shows the "
                 "failure (stages/${stage}/exercises.cmake): let the suite name it")
          endif()
        endforeach()
        continue()
      endif()
      if(NOT id IN_LIST fault_ids)
        fail("${chapter}: '${line}': no planted fault '${id}' in ${FAULTS} (renamed or removed? "
             "pick another fault of ${stage})")
        continue()
      endif()
      get_property(fault_stage GLOBAL PROPERTY FS_FAULT_${id}_STAGE)
      if(NOT fault_stage STREQUAL stage)
        fail("${chapter}: '${line}': fault ${id} is planted in ${fault_stage}, not in ${stage}")
        continue()
      endif()
      list(APPEND exercises ${id})
    endif()
  endforeach()
  get_property(declared GLOBAL PROPERTY FS_EXERCISES_OF_${stage})
  foreach(id IN LISTS declared)
    if(NOT id IN_LIST writes)
      fail("${chapter}: leaves out the exercise ${id} that ${stage} declares (a line "
           "'\\include{doc} exercise_${id}.md')")
    endif()
  endforeach()
  if(NOT boxes EQUAL 1)
    fail("${chapter}: shows its 'Run it here' box ${boxes} times, not once "
         "(a line '\\include{doc} run_${stage}.md')")
  endif()
  list(LENGTH exercises n_exercises)
  if(n_exercises LESS 2)
    fail("${chapter}: ${n_exercises} exercise(s), but every stage chapter ends with at least two "
         "(lines '\\include{doc} exercise_<fault id>.md', faults of ${stage} in ${FAULTS})")
  endif()

  if(DEFINED BUILD_DIR)
    set(binaries "stages/emulated/${runner}" "tests/test_emu_${stage}")
    foreach(id IN LISTS exercises)
      list(APPEND binaries "tests/faults/test_fault_${id}")
    endforeach()
    foreach(id IN LISTS writes)
      list(APPEND binaries "tests/exercises/test_exercise_${id}_stub")
    endforeach()
    foreach(bin IN LISTS binaries)
      if(NOT EXISTS "${BUILD_DIR}/${bin}")
        fail("${chapter}: its commands name ${bin}, which ${BUILD_DIR} does not have")
      endif()
    endforeach()
  endif()

  if(NOT DEFINED GEN_DIR)
    continue()
  endif()

  # The box.
  list(JOIN FLASHSTEPS_RUN_IT_HERE_SHAPE " " shape)
  flashsteps_book_has_layout("${dir}" has_layout)
  set(layout "")
  if(has_layout)
    set(layout
        "\nand which lane holds which element of the tensor-core fragments this stage's kernel "
        "addresses by hand, read off the emulator's models of the instructions:\n\n"
        "    build/cpu/stages/${runner} --emulate --layout\n")
    string(JOIN "" layout ${layout})
  endif()
  file(WRITE "${GEN_DIR}/run_${stage}.md"
"\\htmlonly<div class=\"fs-run-it-here\">\\endhtmlonly
<b>Run it here, without a GPU</b> (preset `cpu`: `cmake --workflow --preset cpu`, or
`tests/run.sh`). The CPU emulator runs this stage's own kernels, thread by thread, and checks
their output with the GPU suite's rule; it times nothing:

    build/cpu/stages/${runner} --emulate ${shape}
${layout}
and the stage's whole GPU suite on the emulator:

    ctest --test-dir build/cpu -R '^emu\\.${stage}$' --output-on-failure

The other commands of this chapter time or profile on a GPU: they are written for the preset `gpu`
(`build/gpu/...`); the preset `cpu` builds the same runners in `build/cpu`, which on a machine
without a GPU refuse with exit code 3. The exercises at the end of the chapter run on either
machine, in `build/cpu` (the preset `gpu` builds no emulator).
\\htmlonly</div>\\endhtmlonly
")
  list(APPEND fragments "run_${stage}.md")

  # The exercises.
  foreach(id IN LISTS exercises)
    foreach(key FILE BREAKS EXPECT TESTS)
      get_property(${key} GLOBAL PROPERTY FS_FAULT_${id}_${key})
    endforeach()
    fault_diff(${id} diff)
    set(file_path "${list_DIR_${stage}}/${FILE}")
    # EXPECT is an extended regex; shown as the text it matches (".*" as "…", no escapes).
    string(REPLACE ".*" " … " evidence "${EXPECT}")
    string(REPLACE "\\" "" evidence "${evidence}")
    if(evidence STREQUAL "heads: FAIL")
      set(evidence_text "the check's summary line reports a failed head (`heads: FAIL`): the "
                        "output is wrong, not NaN")
    elseif(evidence MATCHES "NaN")
      set(evidence_text "the check counts NaN values in O (`... NaN (poison or computed)`): "
                        "shared memory was read before anything was written to it (the "
                        "emulator fills it with NaN before each block)")
    else()
      set(evidence_text "the emulator stops the kernel with a report that names the broken "
                        "rule, and the suite's output matches `${evidence}`")
    endif()
    string(JOIN "" evidence_text ${evidence_text})
    file(WRITE "${GEN_DIR}/exercise_${id}.md"
"<b>Exercise `${id}`.</b> In `${file_path}`, make this one-line change:

${diff}
Predict before you run it: does the stage's GPU suite catch it on the emulator, and how? A wrong
result, NaN read from shared memory nothing wrote, or the emulator stopping the kernel with a
report (a deadlock, a missing fence, an illegal mask)? Which of its test cases fail, and which
pass? Then rebuild and run the whole suite on the emulator (preset `cpu`):

    ninja -C build/cpu test_emu_${stage} && build/cpu/tests/test_emu_${stage}

(Undo the change afterwards: `git checkout ${file_path}`.) The same change is planted, without
touching the source, in the fault test `emu.fault.${id}`:

    ninja -C build/cpu test_fault_${id}
    ctest --test-dir build/cpu -R '^emu\\.fault\\.${id}$' --output-on-failure -V

\\htmlonly<details><summary>Answer</summary>\\endhtmlonly
The change breaks this: ${BREAKS}. The suite fails, and the evidence is that ${evidence_text}.
The fault test runs the test cases `${TESTS}`, which are enough to show it.
The fault's declaration in the stage folder's `faults.cmake` holds the change and the evidence the test
`emu.fault.${id}` requires.
\\htmlonly</details>\\endhtmlonly
")
    list(APPEND fragments "exercise_${id}.md")
  endforeach()

  # The exercises that ask the reader to write the step's lesson.
  foreach(id IN LISTS writes)
    foreach(key FILE TASK SOLUTION)
      get_property(${key} GLOBAL PROPERTY FS_EXERCISE_${id}_${key})
    endforeach()
    # Shown as a code block, each region without the indentation it has in the file, several
    # regions with a line `...` between them (emu/exercises/regions.cmake).
    fsemu_exercise_split("${SOLUTION}" region)
    set(solution "")
    foreach(k RANGE 1 ${region_N})
      string(REGEX MATCH "^ +" indent "${region_${k}}")
      string(LENGTH "${indent}" n_indent)
      string(SUBSTRING "${region_${k}}" ${n_indent} -1 part)
      string(REPLACE "\n${indent}" "\n" part "${part}")
      if(k GREATER 1)
        string(APPEND solution "\n...\n")
      endif()
      string(APPEND solution "${part}")
    endforeach()
    string(REPLACE "\n" "\n    " solution "    ${solution}")
    file(WRITE "${GEN_DIR}/exercise_${id}.md"
"<b>Exercise `${id}` (write it).</b> In a copy of `${list_DIR_${stage}}/${FILE}`, ${TASK}.
The build (preset `cpu`) made the copy, `build/cpu/exercises/${id}/${FILE}`, with those lines cut
out: between the lines `// EXERCISE ${id} begin` and `end` it holds a stub that compiles and that
the suite fails on. Write the lines there, then build your copy for the CPU emulator and run this
stage's whole GPU suite on it, the judge:

    tests/exercise.sh ${id}

It ends with `PASS` or `FAIL` (and the suite's failures). `tests/exercise.sh --stub ${id}` runs
the untouched stub, `--reset` puts it back into your copy; the CTests `exercise.${id}.stub` and
`.solution` show that the stub fails and the stage's own code passes.

\\htmlonly<details><summary>The stage's own lines</summary>\\endhtmlonly

${solution}

\\htmlonly</details>\\endhtmlonly
")
    list(APPEND fragments "exercise_${id}.md")
  endforeach()
endforeach()

if(errors)
  message(FATAL_ERROR "book: the chapters' run boxes and exercises are out of step with the "
                      "stage tree or the planted faults:${errors}")
endif()
list(LENGTH fragments n)
message(STATUS "book: chapters' run boxes and exercises in step with ${STAGE_LIST} and ${FAULTS}"
               " (${n} fragments written)")
