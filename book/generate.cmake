# book/generate.cmake — runs at build time (cmake -P), before Doxygen: asks the table tool for
# the book's generated tables and plots, then checks that what it wrote is something the book can
# include.
#
#   cmake -DTABLE=<fs_table> -DDATA_DIR=<src>/book/data -DGEN_DIR=<dir>
#         -DSTAGE_LIST=<build>/stages.json -P generate.cmake
#
# STAGE_LIST is the stage tree the build writes (flashsteps_write_stage_list()); the table tool
# reads the same file, and every stage in it gets its fragments.
#
# The run the book shows is named by the one-line file book/data/CURRENT (a folder under
# book/data). Without it the table tool is given a folder that does not exist and writes
# placeholders, so the book builds before any GPU run is committed.
cmake_minimum_required(VERSION 3.25)

foreach(var TABLE DATA_DIR GEN_DIR STAGE_LIST)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "generate.cmake: pass -D${var}=...")
  endif()
endforeach()

if(EXISTS "${DATA_DIR}/CURRENT")
  file(STRINGS "${DATA_DIR}/CURRENT" current LIMIT_COUNT 1)
  string(STRIP "${current}" current)
  if(current STREQUAL "")
    message(FATAL_ERROR "book: ${DATA_DIR}/CURRENT is empty; it must name a run folder under "
                        "book/data (or be deleted to build the book with placeholders)")
  endif()
  set(run_dir "${DATA_DIR}/${current}")
  if(NOT IS_DIRECTORY "${run_dir}")
    message(FATAL_ERROR "book: book/data/CURRENT names '${current}', but ${run_dir} is not a "
                        "folder")
  endif()
else()
  # Deliberately a path that does not exist: the table tool's cue to write placeholders.
  set(run_dir "${DATA_DIR}/no-run-committed")
  message(STATUS "book: no book/data/CURRENT; the tables and plots will be placeholders")
endif()

file(REMOVE_RECURSE "${GEN_DIR}")
file(MAKE_DIRECTORY "${GEN_DIR}")
# PTX_DIR (optional): the build's PTX hashes of each stage's kernels, for status_<stage>.md.
# PTXAS_DIR (optional): the build's ptxas reports (<stage>.ptxas.txt), from which the predictions
# about registers, spills and shared memory are judged (verdict_<stage>.md); without it those
# read "not measured".
set(ptx_args "")
if(DEFINED PTX_DIR)
  set(ptx_args --ptx "${PTX_DIR}")
endif()
if(DEFINED PTXAS_DIR)
  list(APPEND ptx_args --ptxas "${PTXAS_DIR}")
endif()
execute_process(COMMAND "${TABLE}" book "${run_dir}" "${GEN_DIR}" --stage-list "${STAGE_LIST}"
                        ${ptx_args}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "book: '${TABLE} book ${run_dir} ${GEN_DIR} --stage-list ${STAGE_LIST}' "
                      "failed (${rc})")
endif()

# The emulated instruction counts against SASS x trip counts (bench/sass-trips.py's committed
# comparison, emulated/sass_trips.tsv of the run), as a table for the page "What the emulator
# counts, and how close it is". PYTHON: any Python 3 (the table needs nothing outside its library).
set(sass_trips "${run_dir}/emulated/sass_trips.tsv")
if(PYTHON AND EXISTS "${sass_trips}")
  execute_process(COMMAND "${PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/../bench/sass-trips.py" markdown
                          "${sass_trips}"
                  OUTPUT_FILE "${GEN_DIR}/sass_trips.md" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "book: bench/sass-trips.py markdown ${sass_trips} failed (${rc})")
  endif()
else()
  file(WRITE "${GEN_DIR}/sass_trips.md"
       "*(No SASS x trip-count comparison: the run has no emulated/sass_trips.tsv, or no Python "
       "was given.)*\n")
endif()

# The model ledger (book/chapters/model_ledger.md): bench/model-ledger.py counts each Hopper
# stage's tile body in the build's sm_90a cubins (PTX_DIR/<stage>.cubin, made in an emulated
# build) and reads the measured inputs from the run; it writes placeholders where either is
# missing.
set(ledger_fragments model_ledger_block.md model_ledger_stall.md model_ledger_tile.md
    model_ledger_inputs.md model_ledger_measured.md model_ledger_steps.md
    model_ledger_summary.md model_ledger_gains.md)
if(PYTHON AND DEFINED PTX_DIR)
  execute_process(COMMAND "${PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/../bench/model-ledger.py"
                          --run "${run_dir}" --stage-list "${STAGE_LIST}" --cubins "${PTX_DIR}"
                          --out "${GEN_DIR}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "book: bench/model-ledger.py failed (${rc})")
  endif()
  # The same names as the script's LEDGER_FRAGMENTS: what it wrote, no more, no less.
  file(GLOB written RELATIVE "${GEN_DIR}" "${GEN_DIR}/model_ledger_*.md")
  list(SORT written)
  set(listed ${ledger_fragments})
  list(SORT listed)
  if(NOT written STREQUAL listed)
    message(FATAL_ERROR "book: bench/model-ledger.py wrote '${written}', generate.cmake lists "
                        "'${listed}': make the two lists the same")
  endif()
else()
  foreach(f IN LISTS ledger_fragments)
    file(WRITE "${GEN_DIR}/${f}" "*(No model ledger: no Python or no PTX folder was given.)*\n")
  endforeach()
endif()

# Stage 08b's static and dynamic walks, simulated from its scheduler.cuh (bench/schedule-sim.cpp)
# on the run's SM count, and their Gantt chart (bench/plots/schedule_gantt.gp).
set(sms "")
if(EXISTS "${run_dir}/provenance.json")
  file(READ "${run_dir}/provenance.json" prov)
  string(JSON sms ERROR_VARIABLE err GET "${prov}" gpu_sm_count)
endif()
set(plots "${CMAKE_CURRENT_LIST_DIR}/../bench/plots")
if(SCHEDULE_SIM AND sms MATCHES "^[0-9]+$")
  execute_process(COMMAND "${SCHEDULE_SIM}" --grid "${sms}" --out "${GEN_DIR}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "book: ${SCHEDULE_SIM} --grid ${sms} --out ${GEN_DIR} failed (${rc})")
  endif()
  execute_process(COMMAND gnuplot -e "datafile='${GEN_DIR}/schedule_gantt.dat'; \
outfile='${GEN_DIR}/schedule_gantt.svg'" "${plots}/schedule_gantt.gp" RESULT_VARIABLE rc)
else()
  foreach(f schedule_08b.md schedule_08b_range.md)
    file(WRITE "${GEN_DIR}/${f}" "*(No simulation of stage 08b's walks: no committed run names "
                                 "the SM count, or fs_schedule_sim was not given.)*\n")
  endforeach()
  execute_process(COMMAND gnuplot -e "outfile='${GEN_DIR}/schedule_gantt.svg'; \
message='No simulation of the schedules.'; \
detail='The committed run names the SM count the simulation needs.'"
                          "${plots}/placeholder.gp" RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "book: gnuplot failed on ${GEN_DIR}/schedule_gantt.svg (${rc})")
endif()

# The pictures of the Hopper and backward chapters (book/pictures.py, which names them: --list):
# drawn from the emulated kernels' event trace, the build's sm_90a cubins and the planted faults.
# BUILD_DIR (the build folder: its emulated runners and cubins) is given by the book target;
# without it each picture is a placeholder saying so, and the contract below does not ask for
# them.
set(pictures "")
if(PYTHON AND BUILD_DIR)
  execute_process(COMMAND "${PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/pictures.py" --build
                          "${BUILD_DIR}" --out "${GEN_DIR}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "book: book/pictures.py --build ${BUILD_DIR} --out ${GEN_DIR} failed "
                        "(${rc}, above)")
  endif()
  file(STRINGS "${GEN_DIR}/pictures.txt" pictures)
  list(APPEND pictures pictures.txt)
elseif(PYTHON)
  execute_process(COMMAND "${PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/pictures.py" --list
                  OUTPUT_VARIABLE names OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  string(REPLACE "\n" ";" names "${names}")
  foreach(p IN LISTS names)
    if(p MATCHES "[.]svg$")
      file(WRITE "${GEN_DIR}/${p}"
           "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\"><text "
           "x=\"10\" y=\"25\" font-size=\"14\">${p}: not drawn (book/pictures.py was given no "
           "build)</text></svg>\n")
    else()
      file(WRITE "${GEN_DIR}/${p}" "*(${p}: not generated: book/pictures.py was given no build.)*\n")
    endif()
  endforeach()
endif()

# Every stage chapter's "Run it here" box and exercises (book/exercises.cmake), from the stage list
# and the planted faults; it fails when a chapter is out of step with either.
# (CHAPTERS and FAULTS: the book's own unless given; tests/stages/add_stage.cmake gives copies
# with a throwaway stage's chapter and faults.)
if(NOT CHAPTERS)
  set(CHAPTERS "${CMAKE_CURRENT_LIST_DIR}/chapters")
endif()
if(NOT FAULTS)
  set(FAULTS "${CMAKE_CURRENT_LIST_DIR}/../emu/faults/faults.cmake")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" "-DSTAGE_LIST=${STAGE_LIST}" "-DCHAPTERS=${CHAPTERS}"
                        "-DFAULTS=${FAULTS}"
                        "-DGEN_DIR=${GEN_DIR}" -P "${CMAKE_CURRENT_LIST_DIR}/exercises.cmake"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "book: book/exercises.cmake failed (above)")
endif()

# The stages of the list, in its order.
include("${CMAKE_CURRENT_LIST_DIR}/../stages/flashsteps_add_stage.cmake")
flashsteps_read_stage_list("${STAGE_LIST}" list)
set(stages ${list_STAGES})

# The contract the chapters rely on: every fragment they \include{doc} and every image they show.
set(expected table_all.md provenance.md emu_compare.md sass_trips.md plot_stages.svg plot_seqlen.svg
    ${ledger_fragments} schedule_08b.md schedule_08b_range.md schedule_gantt.svg ${pictures})
foreach(stage IN LISTS stages)
  list(APPEND expected "table_${stage}.md" "ncu_${stage}.md" "ncu_diff_${stage}.md"
                       "verdict_${stage}.md" "run_${stage}.md" "emu_${stage}.md"
                       "status_${stage}.md" "step_${stage}.md")
endforeach()
list(APPEND expected reading_map.md)  # the front page's reading map (fs_table book_reading_map)
set(missing "")
foreach(f IN LISTS expected)
  if(NOT EXISTS "${GEN_DIR}/${f}")
    list(APPEND missing "${f}")
  endif()
endforeach()
if(missing)
  list(JOIN missing ", " missing)
  message(FATAL_ERROR "book: the table tool did not write ${missing} in ${GEN_DIR}")
endif()

# Doxygen 1.9.4's \include{doc} silently drops everything after a Markdown heading in the included
# file (ATX "# ..." or a setext underline), so a fragment with a heading would lose data without a
# warning. Refuse it here instead; fragments use **bold** lines where they need a title.
file(GLOB fragments "${GEN_DIR}/*.md")
foreach(fragment IN LISTS fragments)
  file(READ "${fragment}" text)
  set(text "\n${text}\n")
  set(heading "")
  if(text MATCHES "\n ? ? ?#+[ \n][^\n]*")
    set(heading "${CMAKE_MATCH_0}")
  elseif(text MATCHES "\n[^\n|]*[^ \n|][^\n|]*\n ? ? ?(=+|-+) *\n")
    set(heading "${CMAKE_MATCH_0}")
  endif()
  if(NOT heading STREQUAL "")
    string(STRIP "${heading}" heading)
    string(REPLACE "\n" " / " heading "${heading}")
    get_filename_component(name "${fragment}" NAME)
    message(FATAL_ERROR "book: ${name} contains a Markdown heading ('${heading}'); Doxygen's "
                        "\\include{doc} drops everything after it. Generated fragments must "
                        "not contain headings (use a **bold** line).")
  endif()
endforeach()
