# flashsteps_stage(...) — in a stage folder's manifest, stages/<name>/stage.cmake: declares the
# stage of that folder (its name is the folder's), with flashsteps_add_stage()'s arguments;
# SOURCES defaults to kernels.cu launcher.cu. stages/CMakeLists.txt reads every folder's manifest
# in name order, and bench/CMakeLists.txt every baseline's (bench/baselines/<name>/stage.cmake).
#
# flashsteps_add_stage(<name> SOURCES <files...> (PARENT <stage> | BASELINE) [DIR <folder>]
#                      TITLE "<title>" TEACHES "<what it teaches>" [KIND forward|backward]
#                      [CHAPTER <path>] [ARCHS <archs...>] [WATCHDOG] [SASS_OVERLAP]
#                      [MEASURED_AS <old name>] [LARGE_STEP "<why>"] [PART <part>])
#
# Turns one stage folder into everything a reader runs:
#   fs_stage_<name>   a library with the stage's kernels and launcher (defines make_stage()):
#                     static, and the same objects as lib/libfs_stage_<name>.so (target
#                     fs_stage_<name>_shared), which the three binaries below link
#   stageNN[x]        the runner: "stage" and the name's part before its first '_' (06c_swizzle ->
#                     stage06c); a baseline keeps its name
#   test_<name>       the shared GPU suite (tests/gpu) run on this stage; exit 77 = skipped
#   bench_<name>      the shared Google Benchmark harness (bench/harness.cpp) on this stage
# Each of the three is main() alone, linking the stage's shared library: the runner and the bench
# link the harness's too, and test_<name> execs the build's one suite executable, fs_gpu_suite,
# which loads the stage's library (CONTRIBUTING.md, "One harness, shared").
# and captures the ptxas resource report (registers, shared memory, spills per kernel and arch)
# of its CUDA sources to ${CMAKE_BINARY_DIR}/resources/<name>.ptxas.txt at build time.
# PARENT: the stage this one builds on, declared before it, of the same KIND. Only the first stage
# of each kind has none (00_scalar, 09a_bwd_scalar): each kind is its own line of the tree. The
# diff of the folder against its parent's is the lesson; the table tool's "vs parent stage"
# columns and Nsight Compute diffs (in the book's chapters too) compare the two. The
# declarations form the stage tree, and flashsteps_write_stage_list() writes it for the table
# tool, the book and the tests.
# BASELINE: not a stage but a reference every stage is compared with (no parent).
# MEASURED_AS: the name the stage had when a committed GPU run measured it (06c_swizzle was
# 06_registers): the table tool reads that run's files of the stage under this name when the run
# has none under the stage's own (book/data/README.md).
# LARGE_STEP: why this step cannot be smaller, for a stage that makes more than 40% of its code
# lines new against its parent (`fs_table steps`, which the test stages.step_sizes runs with
# --check: a larger step without it fails, and so does the declaration on a step that is not
# larger). The chapter's step_<name>.md says it after the step's size.
# WATCHDOG: the stage's kernels spin-wait on barriers (flashsteps/cuda/watchdog.cuh). Its sources
# are then compiled a second time, with the watchdog on, into fs_stage_<name>_checked, which the
# GPU suite links: a wait that never ends fails the test with a message instead of hanging it.
# The runner and the bench keep the library without it, so what they time is unchanged. (Not in a
# build with FLASHSTEPS_WATCHDOG_SUITES off, the cpu preset's: no GPU runs the suites there.)
# PART: the book's part its chapter is in, by the part page's name: PART past_cudnn puts the chapter
# under book/chapters/part_past_cudnn.md (which lists it with \include{doc}
# stage_pages_past_cudnn.md); without it the chapter is in Part II (stage_pages.md).
# SASS_OVERLAP: in the stage's sm_90a SASS every steady-state tile body runs its softmax (MUFU.EX2)
# between the wait for S_j and the wait for P_{j-1} V_{j-1} (the two WARPGROUP.DEPBAR.LE): CPU test
# sass.overlap.<name> (bench/sass-trips.py overlap). When its parent does not declare it, the test
# sass.overlap.<parent> shows that the parent's SASS fails the same check, for that reason.
#
# TITLE: the stage's title (its runner prints it; the stage tables show it). TEACHES: what the step
# teaches, in a line (README's and the book's stage tables are generated from it). KIND: forward
# (the default) or backward: which suite, reference, FLOP count and bench shapes apply. CHAPTER:
# the chapter's path from the repository's root (default book/chapters/stage_<name>.md); its page
# anchor is the runner's name (stage06c). Its planted faults are the folder's faults.cmake.
# TITLE and TEACHES may not contain '"' or '\'.
#
# Under `cmake -P` a call only declares the stage (no targets), so a script can read the tree
# from stages/CMakeLists.txt (stages/stage-tree.cmake and tests/stages/add_stage.cmake do).
set(FLASHSTEPS_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." CACHE INTERNAL "")

# Records a stage (or baseline) in the tree after checking its place in it.
function(_flashsteps_declare_stage name parent baseline dir measured_as large_step kind)
  get_property(stages GLOBAL PROPERTY FLASHSTEPS_STAGES)
  get_property(baselines GLOBAL PROPERTY FLASHSTEPS_BASELINES)
  set(where "flashsteps_add_stage(${name})")
  if(NOT name MATCHES "^[A-Za-z0-9_]+$")
    message(FATAL_ERROR "${where}: a stage name is letters, digits and '_'")
  endif()
  if(name IN_LIST stages OR name IN_LIST baselines)
    message(FATAL_ERROR "${where}: declared twice")
  endif()
  if(baseline)
    if(NOT parent STREQUAL "")
      message(FATAL_ERROR "${where}: a BASELINE has no PARENT")
    endif()
    set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_BASELINES ${name})
  else()
    if(NOT parent STREQUAL "" AND NOT parent IN_LIST stages)
      string(REPLACE ";" ", " known "${stages}")
      message(FATAL_ERROR "${where}: PARENT ${parent} is not a stage declared before it "
                          "(declared so far: ${known})")
    endif()
    # Each KIND is its own line of the tree: its first stage has no parent (00_scalar forward,
    # 09a_bwd_scalar backward), every other names one of the same kind.
    if(kind STREQUAL "")
      set(kind forward)
    endif()
    if(NOT parent STREQUAL "")
      get_property(parent_kind GLOBAL PROPERTY FLASHSTEPS_STAGE_KIND_${parent})
      if(NOT parent_kind STREQUAL kind)
        message(FATAL_ERROR "${where}: KIND ${kind}, but its PARENT ${parent} is of KIND "
                            "${parent_kind}: a stage builds on a stage of its own kind")
      endif()
    endif()
    foreach(other IN LISTS stages)
      get_property(other_kind GLOBAL PROPERTY FLASHSTEPS_STAGE_KIND_${other})
      if(parent STREQUAL "" AND other_kind STREQUAL kind)
        message(FATAL_ERROR "${where}: every ${kind} stage but the first (${other}) names the "
                            "stage it builds on: PARENT <stage>")
      endif()
    endforeach()
    set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_STAGES ${name})
    set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_KIND_${name} "${kind}")
  endif()
  get_filename_component(root "${FLASHSTEPS_ROOT}" ABSOLUTE)
  file(RELATIVE_PATH dir "${root}" "${dir}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_PARENT_${name} "${parent}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_DIR_${name} "${dir}")
  if(NOT measured_as MATCHES "^[A-Za-z0-9_]*$")
    message(FATAL_ERROR "${where}: MEASURED_AS is a stage name: letters, digits and '_'")
  endif()
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_MEASURED_AS_${name} "${measured_as}")
  string(FIND "${large_step}" "\"" quote)
  string(FIND "${large_step}" "\\" backslash)
  if(NOT quote EQUAL -1 OR NOT backslash EQUAL -1)
    message(FATAL_ERROR "${where}: LARGE_STEP's text may not contain '\"' or '\\'")
  endif()
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_LARGE_STEP_${name} "${large_step}")
  # The runner's name, the one rule every reader of the tree takes from stages.json.
  if(name MATCHES "^([0-9][0-9][a-z]?)_")
    set(runner stage${CMAKE_MATCH_1})
  else()
    set(runner ${name})
  endif()
  get_property(runners GLOBAL PROPERTY FLASHSTEPS_RUNNERS)
  if(runner IN_LIST runners)
    message(FATAL_ERROR "${where}: its runner ${runner} is already another stage's: stages "
                        "sharing a number differ in the letter after it (06a_, 06b_)")
  endif()
  set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_RUNNERS ${runner})
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_RUNNER_${name} "${runner}")
endfunction()

# What the tables, the book and the harness read of a stage besides its place in the tree.
function(_flashsteps_describe_stage name baseline dir title teaches kind chapter)
  set(where "flashsteps_add_stage(${name})")
  foreach(field TITLE TEACHES)
    string(TOLOWER ${field} var)
    if("${${var}}" STREQUAL "")
      message(FATAL_ERROR "${where}: ${field} \"...\" is required (stages/<name>/stage.cmake)")
    endif()
    if("${${var}}" MATCHES "[\"\\]")
      message(FATAL_ERROR "${where}: ${field}'s text may not contain '\"' or '\\'")
    endif()
  endforeach()
  if(kind STREQUAL "")
    set(kind forward)
  endif()
  if(NOT kind MATCHES "^(forward|backward)$")
    message(FATAL_ERROR "${where}: KIND is forward or backward, not '${kind}'")
  endif()
  get_filename_component(root "${FLASHSTEPS_ROOT}" ABSOLUTE)
  if(chapter STREQUAL "" AND NOT baseline)
    set(chapter "book/chapters/stage_${name}.md")
  endif()
  # The fault ids of the folder's faults.cmake (emu/faults/faults.cmake includes the file).
  set(faults "")
  if(EXISTS "${dir}/faults.cmake")
    file(STRINGS "${dir}/faults.cmake" lines REGEX "^flashsteps_fault\\(")
    foreach(line IN LISTS lines)
      string(REGEX MATCH "^flashsteps_fault\\(([A-Za-z0-9_]+)" _ "${line}")
      list(APPEND faults ${CMAKE_MATCH_1})
    endforeach()
  endif()
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_TITLE_${name} "${title}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_TEACHES_${name} "${teaches}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_KIND_${name} "${kind}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_CHAPTER_${name} "${chapter}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_FAULTS_${name} "${faults}")
endfunction()

# flashsteps_stage_target(<target> <stage>): a target that compiles the stage's sources (its
# library, the watchdog build, the emulated, sanitized and planted-fault builds) gets the stage's
# folder as include directory and its manifest's name, title and kind, which the launcher's name(),
# title() and (a backward stage's) kind() return (FLASHSTEPS_STAGE_NAME, FLASHSTEPS_STAGE_TITLE,
# FLASHSTEPS_STAGE_KIND).
function(flashsteps_stage_target target name)
  get_property(dir GLOBAL PROPERTY FLASHSTEPS_STAGE_DIR_${name})
  get_property(title GLOBAL PROPERTY FLASHSTEPS_STAGE_TITLE_${name})
  get_property(kind GLOBAL PROPERTY FLASHSTEPS_STAGE_KIND_${name})
  get_filename_component(root "${FLASHSTEPS_ROOT}" ABSOLUTE)
  target_include_directories(${target} PRIVATE "${root}/${dir}")
  target_compile_definitions(${target} PRIVATE "FLASHSTEPS_STAGE_NAME=\"${name}\""
                                               "FLASHSTEPS_STAGE_TITLE=\"${title}\""
                                               "FLASHSTEPS_STAGE_KIND=flashsteps::StageKind::${kind}")
endfunction()

# flashsteps_write_stage_manifests(<file>): every stage's name and title as macros
# (FLASHSTEPS_MANIFEST_NAME_<stage>, FLASHSTEPS_MANIFEST_TITLE_<stage>), for a file that compiles
# several launchers in one translation unit (tests/cpu/stage_launchers.cpp).
function(flashsteps_write_stage_manifests file)
  get_property(stages GLOBAL PROPERTY FLASHSTEPS_STAGES)
  get_property(baselines GLOBAL PROPERTY FLASHSTEPS_BASELINES)
  set(text "// Generated from the stage manifests (flashsteps_write_stage_manifests); do not edit.\n")
  foreach(name IN LISTS stages baselines)
    get_property(title GLOBAL PROPERTY FLASHSTEPS_STAGE_TITLE_${name})
    string(APPEND text "#define FLASHSTEPS_MANIFEST_NAME_${name} \"${name}\"\n"
                       "#define FLASHSTEPS_MANIFEST_TITLE_${name} \"${title}\"\n")
  endforeach()
  string(REPLACE "@" "@AT@" text "${text}")
  set(AT "@")
  file(CONFIGURE OUTPUT "${file}" CONTENT "${text}" @ONLY)
endfunction()

# The manifest's call: the stage of the folder the calling stage.cmake is in.
function(flashsteps_stage)
  get_filename_component(dir "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
  get_filename_component(name "${dir}" NAME)
  set(options WATCHDOG BASELINE SASS_OVERLAP)
  set(one PARENT MEASURED_AS LARGE_STEP TITLE TEACHES KIND CHAPTER PART)
  cmake_parse_arguments(PARSE_ARGV 0 M "${options}" "${one}" "SOURCES;ARCHS")
  if(M_BASELINE)
    set(name "baseline_${name}")  # bench/baselines/cublas: baseline_cublas
  endif()
  if(M_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${dir}/stage.cmake: unexpected arguments '${M_UNPARSED_ARGUMENTS}'")
  endif()
  if(NOT M_SOURCES)
    set(M_SOURCES kernels.cu launcher.cu)
  endif()
  set(args DIR "${dir}" SOURCES ${M_SOURCES})
  foreach(o IN LISTS options)
    if(M_${o})
      list(APPEND args ${o})
    endif()
  endforeach()
  if(M_ARCHS)
    list(APPEND args ARCHS ${M_ARCHS})
  endif()
  # One-value arguments are passed on quoted, ';' and all.
  set(quoted "")
  foreach(o IN LISTS one)
    if(DEFINED M_${o})
      string(APPEND quoted " ${o} [==[${M_${o}}]==]")
    endif()
  endforeach()
  cmake_language(EVAL CODE "flashsteps_add_stage(${name} ${args} ${quoted})")
endfunction()

function(flashsteps_add_stage name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "WATCHDOG;BASELINE;SASS_OVERLAP"
                        "DIR;PARENT;MEASURED_AS;LARGE_STEP;TITLE;TEACHES;KIND;CHAPTER;PART"
                        "SOURCES;ARCHS")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "flashsteps_add_stage(${name}): SOURCES is required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    string(REPLACE ";" "', '" extra "${ARG_UNPARSED_ARGUMENTS}")
    message(FATAL_ERROR "flashsteps_add_stage(${name}): unexpected arguments '${extra}'")
  endif()
  if(NOT ARG_DIR)
    set(ARG_DIR "${CMAKE_CURRENT_LIST_DIR}/${name}")
  endif()
  _flashsteps_declare_stage(${name} "${ARG_PARENT}" "${ARG_BASELINE}" "${ARG_DIR}"
                            "${ARG_MEASURED_AS}" "${ARG_LARGE_STEP}" "${ARG_KIND}")
  _flashsteps_describe_stage(${name} "${ARG_BASELINE}" "${ARG_DIR}" "${ARG_TITLE}"
                             "${ARG_TEACHES}" "${ARG_KIND}" "${ARG_CHAPTER}")
  # The architectures a stage is limited to (empty: every architecture of the build) and whether
  # its kernels spin-wait: recorded in the tree, so that scripts (tests/kernel-identity.sh,
  # bench/run.py) read them from stages.json instead of guessing from the name.
  if(NOT "${ARG_ARCHS}" MATCHES "^[0-9a-z;]*$")
    message(FATAL_ERROR "flashsteps_add_stage(${name}): ARCHS are CUDA architectures (90a, 80)")
  endif()
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_ARCHS_${name} "${ARG_ARCHS}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_WATCHDOG_${name} "${ARG_WATCHDOG}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_SASS_OVERLAP_${name} "${ARG_SASS_OVERLAP}")
  if(NOT "${ARG_PART}" MATCHES "^[a-z0-9_]*$")
    message(FATAL_ERROR "flashsteps_add_stage(${name}): PART is a part page's name (past_cudnn)")
  endif()
  set_property(GLOBAL PROPERTY FLASHSTEPS_STAGE_PART_${name} "${ARG_PART}")
  # kernels.cu is the one file of a stage that nvcc compiles; the host compiler compiles the others,
  # its host sources (below), where __global__ means nothing and a kernel would be a plain host
  # function: one declared there is refused (checked when the build is configured, as CI does).
  set(host_sources ${ARG_SOURCES})
  list(REMOVE_ITEM host_sources kernels.cu)
  list(TRANSFORM host_sources PREPEND "${ARG_DIR}/")
  foreach(src IN LISTS host_sources)
    if(EXISTS "${src}")
      file(STRINGS "${src}" kernel_lines REGEX "^[^/]*__global__")
      if(kernel_lines)
        get_filename_component(file "${src}" NAME)
        message(FATAL_ERROR "flashsteps_add_stage(${name}): ${file} declares a kernel "
                            "(__global__); a stage's kernels are in its kernels.cu, the one file "
                            "nvcc compiles (CONTRIBUTING.md, \"The stage contract\")")
      endif()
    endif()
  endforeach()
  if(CMAKE_SCRIPT_MODE_FILE)
    return()
  endif()
  if(ARG_SASS_OVERLAP)
    _flashsteps_add_sass_overlap_tests(${name} "${ARG_PARENT}")
  endif()
  list(TRANSFORM ARG_SOURCES PREPEND "${ARG_DIR}/")

  set(lib fs_stage_${name})
  add_library(${lib} STATIC ${ARG_SOURCES})
  # A stage's kernels are in its kernels.cu; every other source (launcher.cu) is host code, which
  # the host compiler compiles (-x c++; CONTRIBUTING.md, "The stage contract"). nvcc's passes over
  # a file without a kernel (cudafe++, a device compile of nothing, an empty fatbin) are spent for
  # nothing: the 29 launchers took 102 CPU-s through nvcc and take 42 through g++ (2.7 to 4.4 s a
  # file against 0.7 to 2.1, one at a time on a 2-core machine without a GPU). The property holds
  # in this directory, so for the WATCHDOG build below too.
  if(host_sources)
    set_source_files_properties(${host_sources} TARGET_DIRECTORY ${lib} PROPERTIES LANGUAGE CXX)
  endif()
  flashsteps_stage_target(${lib} ${name})
  target_link_libraries(${lib} PUBLIC flashsteps::common)
  if(ARG_ARCHS)
    set_target_properties(${lib} PROPERTIES CUDA_ARCHITECTURES "${ARG_ARCHS}")
  endif()
  # ptxas -v for every CUDA object; the wrapper files each object's report next to it (and runs
  # the host compiles of the library too, whose files hold no report).
  target_compile_options(${lib} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v,-warn-spills>")
  # A stage whose kernels compile for the PTX manifest's arch alone (ARCHS 90a), at Release's
  # flags (-O3 -lineinfo, nothing added to CMAKE_CUDA_FLAGS), makes the PTX and the cubin the
  # manifest below hashes and keeps: the wrapper keeps them (--keep), and the manifest reads them
  # instead of compiling kernels.cu a second time (the hashes are byte-identical: compared on every
  # such stage when this came in). Every other stage's manifest compiles its own.
  set(manifest_arch 90a)  # tests/ptx-manifest.sh's default, sm_90a
  set(keep "")
  if("${ARG_ARCHS}" STREQUAL "${manifest_arch}" AND CMAKE_BUILD_TYPE STREQUAL "Release"
     AND "${CMAKE_CUDA_FLAGS}" STREQUAL "" AND "${ARG_DIR}/kernels.cu" IN_LIST ARG_SOURCES)
    set(keep --keep kernels.cu)
  endif()
  list(JOIN keep " " keep_args)
  set_property(TARGET ${lib} PROPERTY RULE_LAUNCH_COMPILE
               "${FLASHSTEPS_ROOT}/stages/ptxas-report.sh ${keep_args} <OBJECT>")
  set(report "${CMAKE_BINARY_DIR}/resources/${name}.ptxas.txt")
  add_custom_command(TARGET ${lib} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DOUT=${report} "-DOBJECTS=$<JOIN:$<TARGET_OBJECTS:${lib}>,|>"
            -P "${FLASHSTEPS_ROOT}/stages/collect-ptxas.cmake"
    VERBATIM)

  # The same objects as lib${lib}.so, which the runner, the suite (unless WATCHDOG) and the bench
  # link: the stage's device code once in a bundle, not in three binaries.
  flashsteps_shared_library(${lib}_shared OBJECTS_OF ${lib} LINK flashsteps_common_shared)

  get_property(runner GLOBAL PROPERTY FLASHSTEPS_STAGE_RUNNER_${name})
  add_executable(${runner} $<TARGET_OBJECTS:flashsteps_stage_main>)
  target_link_libraries(${runner} PRIVATE ${lib}_shared flashsteps_runner_shared)
  set_target_properties(${runner} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/stages")

  # This build's per-kernel PTX hashes of the stage (tests/ptx-manifest.sh), for the table tool:
  # are the stage's kernels still the ones the committed run measured (book/data/README.md)?
  if("${ARG_DIR}/kernels.cu" IN_LIST ARG_SOURCES)
    get_filename_component(root "${FLASHSTEPS_ROOT}" ABSOLUTE)
    file(RELATIVE_PATH source "${root}" "${ARG_DIR}/kernels.cu")
    file(GLOB_RECURSE headers CONFIGURE_DEPENDS "${root}/common/include/*.cuh"
         "${root}/common/include/*.hpp" "${ARG_DIR}/*.cuh")
    set(hashes "${CMAKE_BINARY_DIR}/ptx/${name}.tsv")
    # And, in the builds where CTest emu.sass.trips runs (the emulated ones), the stage's sm_90a
    # cubin from the same PTX, which that test disassembles.
    set(cubin "")
    set(cubin_args "")
    # With the PTX it was made from: bench/bundle_size.py bounds the sm_90a bundle by both.
    if(FLASHSTEPS_EMULATION)
      set(cubin "${CMAKE_BINARY_DIR}/ptx/${name}.cubin" "${CMAKE_BINARY_DIR}/ptx/${name}.ptx")
      set(cubin_args --cubin "${CMAKE_BINARY_DIR}/ptx/${name}.cubin"
                     --ptx "${CMAKE_BINARY_DIR}/ptx/${name}.ptx")
    endif()
    set(kept_args "")
    set(kept_object "")
    if(keep)  # the stage library's own compile of kernels.cu, kept by the wrapper (above)
      set(kept_object "$<FILTER:$<TARGET_OBJECTS:${lib}>,INCLUDE,/kernels\\.cu\\.o(bj)?$>")
      set(kept_args --kept "${kept_object}.keep")
    endif()
    add_custom_command(OUTPUT "${hashes}" ${cubin}
      COMMAND "${root}/tests/ptx-manifest.sh" --root "${root}" -o "${hashes}" ${cubin_args}
              ${kept_args} "${source}"
      DEPENDS "${ARG_DIR}/kernels.cu" ${headers} "${root}/tests/ptx-manifest.sh" ${kept_object}
      COMMENT "PTX hashes of ${name}'s kernels (sm_90a)"
      VERBATIM)
    add_custom_target(ptx_${name} ALL DEPENDS "${hashes}")
    set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_PTX_TARGETS ptx_${name})
  endif()

  set(test_lib ${lib})
  if(ARG_WATCHDOG AND FLASHSTEPS_WATCHDOG_SUITES)
    set(test_lib ${lib}_checked)
    add_library(${test_lib} STATIC ${ARG_SOURCES})
    flashsteps_stage_target(${test_lib} ${name})
    target_link_libraries(${test_lib} PUBLIC flashsteps::common)
    # About two seconds at 2 GHz: far past any real wait (flashsteps/cuda/watchdog.cuh).
    target_compile_definitions(${test_lib} PRIVATE FLASHSTEPS_WATCHDOG_CYCLES=4000000000LL)
    if(ARG_ARCHS)
      set_target_properties(${test_lib} PROPERTIES CUDA_ARCHITECTURES "${ARG_ARCHS}")
    endif()
    flashsteps_shared_library(${test_lib}_shared OBJECTS_OF ${test_lib}
                              LINK flashsteps_common_shared)
  endif()
  # test_<stage> execs the build's one suite executable with its library (tests/CMakeLists.txt).
  target_sources(${test_lib}_shared PRIVATE $<TARGET_OBJECTS:flashsteps_stage_entry>)
  add_executable(test_${name} $<TARGET_OBJECTS:flashsteps_gpu_launcher>)
  target_link_libraries(test_${name} PRIVATE ${test_lib}_shared ${CMAKE_DL_LIBS})
  add_dependencies(test_${name} fs_gpu_suite)
  set_target_properties(test_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
  add_test(NAME gpu.${name} COMMAND test_${name})
  set_tests_properties(gpu.${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu)

  # (A baseline's cuBLAS calls run on the emulator's model of the API, emu/src/cublas.cpp.)
  if(TARGET fsemu)
    _flashsteps_add_emulated_stage(${name} ${runner} "${ARG_DIR}" ${ARG_SOURCES})
  endif()

  if(TARGET flashsteps_bench_harness)
    add_executable(bench_${name} $<TARGET_OBJECTS:flashsteps_bench_main>)
    target_link_libraries(bench_${name} PRIVATE ${lib}_shared flashsteps_bench_shared)
    set_target_properties(bench_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
  endif()
endfunction()

# SASS_OVERLAP's tests (bench/sass-trips.py overlap reads the SASS of the stage's kernels.cu for
# sm_90a with nvdisasm, which tests/install-deps.sh puts in build/venv; in an emulated build from
# the cubin the build makes beside the PTX hashes, <build>/ptx/<stage>.cubin, elsewhere compiled
# by the script with nvcc).
function(_flashsteps_sass_cubin_args out stage)
  set(${out} "" PARENT_SCOPE)
  if(FLASHSTEPS_EMULATION)
    set(${out} --cubin "${CMAKE_BINARY_DIR}/ptx/${stage}.cubin" PARENT_SCOPE)
  endif()
endfunction()
function(_flashsteps_add_sass_overlap_tests name parent)
  if(NOT DEFINED Python_EXECUTABLE OR NOT EXISTS "${Python_EXECUTABLE}")
    return()
  endif()
  set(script "${FLASHSTEPS_ROOT}/bench/sass-trips.py")
  get_property(dir GLOBAL PROPERTY FLASHSTEPS_STAGE_DIR_${name})
  _flashsteps_sass_cubin_args(cubin_args ${name})
  add_test(NAME sass.overlap.${name}
           COMMAND ${Python_EXECUTABLE} ${script} overlap ${dir} ${cubin_args})
  set_tests_properties(sass.overlap.${name} PROPERTIES LABELS cpu TIMEOUT 600)
  get_property(parent_has GLOBAL PROPERTY FLASHSTEPS_STAGE_SASS_OVERLAP_${parent})
  if(parent STREQUAL "" OR parent_has)
    return()
  endif()
  # The parent's SASS must fail the check, for the hoisted wait, in every tile body.
  get_property(parent_dir GLOBAL PROPERTY FLASHSTEPS_STAGE_DIR_${parent})
  _flashsteps_sass_cubin_args(cubin_args ${parent})
  add_test(NAME sass.overlap.${parent}
           COMMAND ${Python_EXECUTABLE} ${script} overlap ${parent_dir} ${cubin_args})
  set_tests_properties(sass.overlap.${parent} PROPERTIES LABELS cpu TIMEOUT 600
    PASS_REGULAR_EXPRESSION "overlap: FAIL: .*WARPGROUP.DEPBAR.LE gsb0, 0x0 \\(the wait for P V\\) comes before [1-9][0-9]* of the"
    FAIL_REGULAR_EXPRESSION "overlap: ok:|no steady-state tile body|sass-trips: needs")
endfunction()

# An emulated sm_90a kernel that runs setmaxnreg is launched with the registers ptxas gave it
# (emu/src/registers.cpp reads <build>/resources/<stage>.ptxas.txt, which the stage library's
# build writes): the emulated binaries of an ARCHS-90a stage depend on that library, so that
# building one of them alone builds its report too.
function(_flashsteps_needs_ptxas_report name)
  get_property(archs GLOBAL PROPERTY FLASHSTEPS_STAGE_ARCHS_${name})
  if("90a" IN_LIST archs AND TARGET fs_stage_${name})
    foreach(target IN LISTS ARGN)
      add_dependencies(${target} fs_stage_${name})
    endforeach()
  endif()
endfunction()

# The stage for the CPU emulator (emu/CMakeLists.txt): the same sources compiled by the host
# compiler, its GPU suite (test_emu_<name>, ctest emu.<name>) and its runner
# (stages/emulated/stageNN[x], which `stageNN[x] --emulate` runs).
function(_flashsteps_add_emulated_stage name runner dir)
  flashsteps_emulated_sources(sources ${ARGN})
  set(lib fs_emu_stage_${name})
  add_library(${lib} STATIC ${sources})
  flashsteps_stage_target(${lib} ${name})
  target_link_libraries(${lib} PUBLIC fs_emu_common)
  # Position-independent, as a Python module needs it (python/CMakeLists.txt), in every build: the
  # precompiled shim it reads is made so.
  set_property(TARGET ${lib} PROPERTY POSITION_INDEPENDENT_CODE ON)
  fsemu_precompiled_shim(${lib} kernels)
  add_executable(${runner}_emulated $<TARGET_OBJECTS:fs_emu_stage_main>)
  target_link_libraries(${runner}_emulated PRIVATE ${lib} fs_emu_runner)
  set_target_properties(${runner}_emulated PROPERTIES OUTPUT_NAME ${runner}
                        RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/stages/emulated")
  # `${runner} --emulate` execs it: building the runner builds what its --emulate runs.
  add_dependencies(${runner} ${runner}_emulated)
  add_executable(test_emu_${name} $<TARGET_OBJECTS:fs_emu_gpu_suite_obj>)
  target_link_libraries(test_emu_${name} PRIVATE ${lib} fs_emu_common flashsteps::catch2)
  _flashsteps_needs_ptxas_report(${name} ${runner}_emulated test_emu_${name})
  set_target_properties(test_emu_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
  add_test(NAME emu.${name} COMMAND test_emu_${name} ${FLASHSTEPS_CATCH_ARGS})
  # COST: among the longest tests, started early (tests/CMakeLists.txt, emu.profile.compare's COST).
  set_tests_properties(emu.${name} PROPERTIES LABELS "cpu;emu" COST 30
                       FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL}")
endfunction()

# The fields _flashsteps_describe_stage() recorded, as JSON members (", \"title\": ..."): the
# stage's number (06c; none for a baseline), title, teaches, kind, chapter and its anchor, faults.
function(_flashsteps_description_json name out)
  set(j "")
  if(name MATCHES "^([0-9]+[a-z]?)_")
    string(APPEND j ", \"number\": \"${CMAKE_MATCH_1}\"")
  endif()
  foreach(field title teaches kind)
    string(TOUPPER ${field} up)
    get_property(value GLOBAL PROPERTY FLASHSTEPS_STAGE_${up}_${name})
    string(APPEND j ", \"${field}\": \"${value}\"")
  endforeach()
  get_property(chapter GLOBAL PROPERTY FLASHSTEPS_STAGE_CHAPTER_${name})
  if(NOT chapter STREQUAL "")
    get_property(runner GLOBAL PROPERTY FLASHSTEPS_STAGE_RUNNER_${name})
    string(APPEND j ", \"chapter\": \"${chapter}\", \"anchor\": \"${runner}\"")
  endif()
  get_property(faults GLOBAL PROPERTY FLASHSTEPS_STAGE_FAULTS_${name})
  set(quoted "")
  foreach(f IN LISTS faults)
    list(APPEND quoted "\"${f}\"")
  endforeach()
  list(JOIN quoted ", " quoted)
  string(APPEND j ", \"faults\": [${quoted}]")
  set(${out} "${j}" PARENT_SCOPE)
endfunction()

# flashsteps_write_stage_list(<file>): the stage tree as JSON, the one list the table tool, the
# book and the tests read; the stages in declaration order (each after its parent), then the
# baselines. The file is rewritten only when its text changes.
#   {"stages": [{"name": "04_cp_async", "parent": "03_online_softmax",
#                "dir": "stages/04_cp_async", "runner": "stage04"}, ...,
#               {"name": "06c_swizzle", ..., "measured_as": "06_registers",
#                "large_step": "..."}, ...,
#               {"name": "07d_overlap", ..., "archs": ["90a"], "watchdog": true}],
#    "baselines": [{"name": "baseline_cublas", "dir": "bench/baselines/cublas",
#                   "runner": "baseline_cublas"}]}
function(flashsteps_write_stage_list file)
  get_property(stages GLOBAL PROPERTY FLASHSTEPS_STAGES)
  get_property(baselines GLOBAL PROPERTY FLASHSTEPS_BASELINES)
  set(json "{\n  \"stages\": [")
  set(sep "")
  foreach(name IN LISTS stages)
    get_property(parent GLOBAL PROPERTY FLASHSTEPS_STAGE_PARENT_${name})
    get_property(dir GLOBAL PROPERTY FLASHSTEPS_STAGE_DIR_${name})
    if(parent STREQUAL "")
      set(parent "null")
    else()
      set(parent "\"${parent}\"")
    endif()
    get_property(measured_as GLOBAL PROPERTY FLASHSTEPS_STAGE_MEASURED_AS_${name})
    set(extra "")
    if(NOT measured_as STREQUAL "")
      string(APPEND extra ", \"measured_as\": \"${measured_as}\"")
    endif()
    get_property(large_step GLOBAL PROPERTY FLASHSTEPS_STAGE_LARGE_STEP_${name})
    if(NOT large_step STREQUAL "")
      string(APPEND extra ", \"large_step\": \"${large_step}\"")
    endif()
    get_property(archs GLOBAL PROPERTY FLASHSTEPS_STAGE_ARCHS_${name})
    if(NOT archs STREQUAL "")
      string(REPLACE ";" "\", \"" archs "${archs}")
      string(APPEND extra ", \"archs\": [\"${archs}\"]")
    endif()
    get_property(watchdog GLOBAL PROPERTY FLASHSTEPS_STAGE_WATCHDOG_${name})
    if(watchdog)
      string(APPEND extra ", \"watchdog\": true")
    endif()
    get_property(part GLOBAL PROPERTY FLASHSTEPS_STAGE_PART_${name})
    if(NOT part STREQUAL "")
      string(APPEND extra ", \"part\": \"${part}\"")
    endif()
    # The walk up the tree, made once here: every reader takes a stage's ancestors from this list
    # (nearest first) instead of following "parent" itself.
    set(ancestors "")
    get_property(up GLOBAL PROPERTY FLASHSTEPS_STAGE_PARENT_${name})
    while(NOT up STREQUAL "")
      list(APPEND ancestors "\"${up}\"")
      get_property(up GLOBAL PROPERTY FLASHSTEPS_STAGE_PARENT_${up})
    endwhile()
    list(JOIN ancestors ", " ancestors)
    string(APPEND extra ", \"ancestors\": [${ancestors}]")
    get_property(runner GLOBAL PROPERTY FLASHSTEPS_STAGE_RUNNER_${name})
    _flashsteps_description_json(${name} description)
    string(APPEND json "${sep}\n    {\"name\": \"${name}\", \"parent\": ${parent}, "
                       "\"dir\": \"${dir}\", \"runner\": \"${runner}\"${description}${extra}}")
    set(sep ",")
  endforeach()
  string(APPEND json "\n  ],\n  \"baselines\": [")
  set(sep "")
  foreach(name IN LISTS baselines)
    get_property(dir GLOBAL PROPERTY FLASHSTEPS_STAGE_DIR_${name})
    get_property(runner GLOBAL PROPERTY FLASHSTEPS_STAGE_RUNNER_${name})
    _flashsteps_description_json(${name} description)
    string(APPEND json "${sep}\n    {\"name\": \"${name}\", \"dir\": \"${dir}\", "
                       "\"runner\": \"${runner}\"${description}}")
    set(sep ",")
  endforeach()
  string(APPEND json "\n  ]\n}\n")
  # Written only when its text changes (file(CONFIGURE) compares), so that nothing rebuilds.
  string(REPLACE "@" "@AT@" json "${json}")
  set(AT "@")
  file(CONFIGURE OUTPUT "${file}" CONTENT "${json}" @ONLY)
endfunction()

# flashsteps_read_stage_list(<file> <prefix>): reads a list flashsteps_write_stage_list() wrote.
# Sets <prefix>_STAGES and <prefix>_BASELINES (names, in the list's order) and, for each name,
# <prefix>_PARENT_<name> (empty for the first stage and the baselines), <prefix>_DIR_<name> and
# <prefix>_RUNNER_<name>, <prefix>_MEASURED_AS_<name> and <prefix>_LARGE_STEP_<name> (empty unless
# declared), and for stages <prefix>_ANCESTORS_ (nearest first), _CHAPTER_, _ANCHOR_, _TITLE_,
# _TEACHES_ and _KIND_<name>.
function(flashsteps_read_stage_list file prefix)
  file(READ "${file}" json)
  foreach(kind stages baselines)
    string(TOUPPER ${kind} var)
    set(names "")
    string(JSON count LENGTH "${json}" ${kind})
    if(count GREATER 0)
      math(EXPR last "${count} - 1")
      foreach(i RANGE ${last})
        string(JSON name GET "${json}" ${kind} ${i} name)
        string(JSON dir GET "${json}" ${kind} ${i} dir)
        string(JSON runner GET "${json}" ${kind} ${i} runner)
        set(${prefix}_RUNNER_${name} "${runner}" PARENT_SCOPE)
        set(parent "")
        set(measured_as "")
        if(kind STREQUAL "stages")
          string(JSON parent GET "${json}" ${kind} ${i} parent)
          string(JSON measured_as ERROR_VARIABLE absent GET "${json}" ${kind} ${i} measured_as)
          if(absent)
            set(measured_as "")
          endif()
          string(JSON large_step ERROR_VARIABLE absent GET "${json}" ${kind} ${i} large_step)
          if(absent)
            set(large_step "")
          endif()
          set(${prefix}_LARGE_STEP_${name} "${large_step}" PARENT_SCOPE)
          set(ancestors "")
          string(JSON n ERROR_VARIABLE absent LENGTH "${json}" ${kind} ${i} ancestors)
          if(NOT absent AND n GREATER 0)
            math(EXPR last_a "${n} - 1")
            foreach(a RANGE ${last_a})
              string(JSON up GET "${json}" ${kind} ${i} ancestors ${a})
              list(APPEND ancestors ${up})
            endforeach()
          endif()
          set(${prefix}_ANCESTORS_${name} "${ancestors}" PARENT_SCOPE)
          foreach(field chapter anchor title teaches kind)
            string(JSON value ERROR_VARIABLE absent GET "${json}" ${kind} ${i} ${field})
            if(absent)
              set(value "")
            endif()
            string(TOUPPER ${field} up)
            set(${prefix}_${up}_${name} "${value}" PARENT_SCOPE)
          endforeach()
        endif()
        list(APPEND names ${name})
        set(${prefix}_MEASURED_AS_${name} "${measured_as}" PARENT_SCOPE)
        set(${prefix}_PARENT_${name} "${parent}" PARENT_SCOPE)
        set(${prefix}_DIR_${name} "${dir}" PARENT_SCOPE)
      endforeach()
    endif()
    set(${prefix}_${var} "${names}" PARENT_SCOPE)
  endforeach()
endfunction()
