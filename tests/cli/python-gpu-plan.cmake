# cmake -DROOT=<source dir> -DSTAGES=<build>/stages.json -DWORK=<scratch dir>
#       -P python-gpu-plan.cmake
# bench/python-gpu.sh --dry-run on a machine without a GPU (the stand-in nvidia-smi of
# tests/cli/no-gpu comes first on PATH, so GPU hosts take the same path): it exits 0, its plan has
# the build, one compare step for every forward stage of the stage tree the build wrote
# (stages.json; the names are read from it, not made here), and the pytest step, each with its timeout, and it
# creates neither its --out nor its --work folder; then the torch step (test_torch.py on CUDA tensors)
# and the example on CUDA.
cmake_minimum_required(VERSION 3.25)
foreach(var ROOT STAGES WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "python-gpu-plan.cmake: pass -D${var}=...")
  endif()
endforeach()
include("${ROOT}/stages/flashsteps_add_stage.cmake")
flashsteps_read_stage_list("${STAGES}" built)
# The forward stages: compare_with_sdpa.py checks attention()'s output, which a backward stage
# (KIND backward) does not make.
set(forward "")
foreach(name IN LISTS built_STAGES)
  if(NOT "${built_KIND_${name}}" STREQUAL "backward")
    list(APPEND forward ${name})
  endif()
endforeach()
list(LENGTH forward count)
if(count EQUAL 0)
  message(FATAL_ERROR "${STAGES} lists no stage")
endif()

file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PATH=${ROOT}/tests/cli/no-gpu:$ENV{PATH}"
                        "${ROOT}/bench/python-gpu.sh" --dry-run --out "${WORK}/out"
                        --work "${WORK}/work"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit code 0 from --dry-run, got ${rc}")
endif()

function(expect text)
  string(FIND "${out}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected the plan to contain '${text}'")
  endif()
endfunction()
expect("python-gpu plan: ${count} stages")
expect("[build, timeout ")
expect("pip install --no-index")
foreach(name IN LISTS forward)
  expect("[compare ${name}, timeout ")
  expect("--stage ${name}\n")
endforeach()
# No step for a stage the tree does not have.
string(REGEX MATCHALL "\\[compare [^,]*, timeout [0-9]+ s\\]" steps "${out}")
list(LENGTH steps planned)
if(NOT planned EQUAL count)
  message(FATAL_ERROR "the plan has ${planned} compare steps for the ${count} stages of ${STAGES}")
endif()
expect("[pytest, timeout ")
expect("-k test_stage_matches_sdpa_on_the_gpu")
expect("[torch, timeout ")
expect("FLASHSTEPS_TEST_DEVICE=cuda")
expect("python/tests/test_torch.py")
expect("[example, timeout ")
expect("examples/sdpa_in_a_model.py --device cuda")
expect("--dry-run: nothing was run")
foreach(dir out work)
  if(EXISTS "${WORK}/${dir}")
    message(FATAL_ERROR "--dry-run created ${WORK}/${dir}")
  endif()
endforeach()
