# flashsteps_add_stage(<name> SOURCES <files...> [DIR <folder>] [ARCHS <archs...>] [WATCHDOG])
#
# Turns one stage folder into everything a reader runs:
#   fs_stage_<name>   a library with the stage's kernels and launcher (defines make_stage())
#   stageNN           the runner (NN from the name's leading digits; baselines keep their name)
#   test_<name>       the shared GPU suite (tests/gpu) run on this stage; exit 77 = skipped
#   bench_<name>      the shared Google Benchmark harness (bench/harness.cpp) on this stage
# and captures the ptxas resource report (registers, shared memory, spills per kernel and arch)
# of its CUDA sources to ${CMAKE_BINARY_DIR}/resources/<name>.ptxas.txt at build time.
# WATCHDOG: the stage's kernels spin-wait on barriers (flashsteps/cuda/watchdog.cuh). Its sources
# are then compiled a second time, with the watchdog on, into fs_stage_<name>_checked, which the
# GPU suite links: a wait that never ends fails the test with a message instead of hanging it.
# The runner and the bench keep the library without it, so what they time is unchanged.
set(FLASHSTEPS_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." CACHE INTERNAL "")

function(flashsteps_add_stage name)
  cmake_parse_arguments(ARG "WATCHDOG" "DIR" "SOURCES;ARCHS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "flashsteps_add_stage(${name}): SOURCES is required")
  endif()
  if(NOT ARG_DIR)
    set(ARG_DIR "${CMAKE_CURRENT_SOURCE_DIR}/${name}")
  endif()
  list(TRANSFORM ARG_SOURCES PREPEND "${ARG_DIR}/")

  set(lib fs_stage_${name})
  add_library(${lib} STATIC ${ARG_SOURCES})
  target_include_directories(${lib} PRIVATE "${ARG_DIR}")
  target_link_libraries(${lib} PUBLIC flashsteps::common)
  if(ARG_ARCHS)
    set_target_properties(${lib} PROPERTIES CUDA_ARCHITECTURES "${ARG_ARCHS}")
  endif()
  # ptxas -v for every CUDA object; the wrapper files each object's report next to it.
  target_compile_options(${lib} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v,-warn-spills>")
  set_property(TARGET ${lib} PROPERTY RULE_LAUNCH_COMPILE
               "${FLASHSTEPS_ROOT}/stages/ptxas-report.sh <OBJECT>")
  set(report "${CMAKE_BINARY_DIR}/resources/${name}.ptxas.txt")
  add_custom_command(TARGET ${lib} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DOUT=${report} "-DOBJECTS=$<TARGET_OBJECTS:${lib}>"
            -P "${FLASHSTEPS_ROOT}/stages/collect-ptxas.cmake"
    COMMAND_EXPAND_LISTS VERBATIM)

  if(name MATCHES "^([0-9][0-9])_")
    set(runner stage${CMAKE_MATCH_1})
  else()
    set(runner ${name})
  endif()
  add_executable(${runner} $<TARGET_OBJECTS:flashsteps_stage_main>)
  target_link_libraries(${runner} PRIVATE ${lib} flashsteps::runner)
  set_target_properties(${runner} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/stages")

  set(test_lib ${lib})
  if(ARG_WATCHDOG)
    set(test_lib ${lib}_checked)
    add_library(${test_lib} STATIC ${ARG_SOURCES})
    target_include_directories(${test_lib} PRIVATE "${ARG_DIR}")
    target_link_libraries(${test_lib} PUBLIC flashsteps::common)
    # About two seconds at 2 GHz: far past any real wait (flashsteps/cuda/watchdog.cuh).
    target_compile_definitions(${test_lib} PRIVATE FLASHSTEPS_WATCHDOG_CYCLES=4000000000LL)
    if(ARG_ARCHS)
      set_target_properties(${test_lib} PROPERTIES CUDA_ARCHITECTURES "${ARG_ARCHS}")
    endif()
  endif()
  add_executable(test_${name} ${FLASHSTEPS_GPU_SUITE_SOURCES})
  target_link_libraries(test_${name} PRIVATE ${test_lib} flashsteps_gpu_suite)
  set_target_properties(test_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
  add_test(NAME gpu.${name} COMMAND test_${name})
  set_tests_properties(gpu.${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu)

  if(TARGET flashsteps_bench_harness)
    add_executable(bench_${name} $<TARGET_OBJECTS:flashsteps_bench_harness>)
    target_link_libraries(bench_${name} PRIVATE ${lib} flashsteps_bench_common)
    set_target_properties(bench_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
  endif()
  set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_STAGES ${name})
endfunction()
