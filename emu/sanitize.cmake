# Sanitizer builds of the emulated stages (item 4 of the emulator issue): see emu/README.md.
#
# The checks a GPU cannot give cheaply, from the compiler's sanitizers run over the emulator:
#   AddressSanitizer   out-of-bounds global accesses (cudaMalloc is malloc: its redzone starts
#                      where the buffer ends) and shared ones (the window outside the block's
#                      dynamic shared memory is poisoned; a static __shared__ array is a global
#                      variable, which ASan guards itself); the report adds the CUDA thread
#   ThreadSanitizer    shared- (and global-) memory races inside a block: every CUDA thread is a
#                      TSan fiber named after it, and only the emulator's synchronisation orders
#                      their accesses (barriers, warp collectives, mbarriers, copy landings)
# (emu/src/sanitize.hpp). Reads of shared memory nothing wrote are the emulator's own check: the
# window is 0xFF (NaN) until written. MemorySanitizer is not offered: Clang only, and it needs
# every library the program links (libstdc++, Boost, Catch2) built with it.
#
#   fsemu_asan, fsemu_tsan          the emulator, for each sanitizer (fsemu_tsan's runtime and
#                                   copies are compiled without -fsanitize=thread: their
#                                   bookkeeping is not the kernels' and would only be noise; its
#                                   models and intrinsics with it; it links the TSan runtime)
#   test_emu_<stage>_{asan,tsan}    the GPU suite on the stage's kernels built with the sanitizer
#                                   (tests/sanitize/), CTest emu.{asan,tsan}.<stage>: the cases in
#                                   FSEMU_SANITIZER_CASES must pass with no report
#   fsemu_planted_{asan,tsan}       kernels with a planted race, shared and global out-of-bounds
#                                   read, a plain load racing an atomicAdd
#                                   (tests/sanitize/planted.cu); CTest emu.{asan,tsan}.planted_*
#                                   pass only when the sanitizer reports them
#                                   (emu/tests/expect-failure.sh)
option(FLASHSTEPS_EMULATION_SANITIZERS
       "Build sanitizer (ASan, TSan) flavours of the emulated stage tests (emu/sanitize.cmake)" ON)
set(FSEMU_SANITIZED_STAGES "all" CACHE STRING
    "Stages whose emulated suite runs under ASan and TSan: 'all' or a list of stage names")
# FSEMU_ONE_CASE, a case of the GPU suite (tests/gpu/suite.cpp), and the variant it runs there
# (bf16, D 64, causal). A build that runs that case alone compiles a fused stage's kernel of that
# variant alone (FS_DEFINE_KERNEL_OF, flashsteps/fused_stage.cuh; the other variants' launches
# fail, naming this): the sanitizer builds below while FSEMU_SANITIZER_CASES is that case, and the
# planted faults that run it (emu/faults). Measured: 07d's TSan kernels 2.0 -> 0.9 CPU-s, a 07d
# fault's copy at -O0 1.1 -> 0.6. Should the case change, its launch would fail in every such
# build, naming FSEMU_ONE_CASE.
set(FSEMU_ONE_CASE "a non-default softmax scale" CACHE INTERNAL "")
set(FSEMU_ONE_CASE_VARIANT FSEMU_ONLY_DTYPE=__nv_bfloat16 FSEMU_ONLY_HEAD_DIM=64
    FSEMU_ONLY_CAUSAL=true CACHE INTERNAL "")
set(FSEMU_SANITIZER_CASES "${FSEMU_ONE_CASE}" CACHE STRING
    "Catch2 test spec of the GPU-suite cases the sanitizer builds run (',' separates cases)")
# fsemu_one_case_build(<target> <test spec>): <target>'s kernels are those of FSEMU_ONE_CASE's
# variant alone when <test spec>, the cases its binary runs, is that case; else all of them.
function(fsemu_one_case_build target spec)
  if(spec STREQUAL FSEMU_ONE_CASE)
    target_compile_definitions(${target} PRIVATE ${FSEMU_ONE_CASE_VARIANT})
  endif()
endfunction()

if(NOT FLASHSTEPS_EMULATION_SANITIZERS)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(STATUS "Emulator sanitizer builds: off (they need GCC or Clang, not "
                 "${CMAKE_CXX_COMPILER_ID})")
  return()
endif()

set(FSEMU_SANITIZE_DIR "${CMAKE_CURRENT_SOURCE_DIR}/tests/sanitize" CACHE INTERNAL "")
# -O1: the cases are small and the emulator's cost is in scheduling; -g1: the reports name lines
# (line tables; full debug information, -g, took a third of these builds' compile time for nothing
# the reports use).
set(FSEMU_ASAN_FLAGS -fsanitize=address -fno-omit-frame-pointer -g1 -O1 CACHE INTERNAL "")
# TSan: GCC expands a small memcpy / memset inline after its TSan pass, uninstrumented: kept as
# calls, they reach TSan's interceptors (WMMA's element copies, the stages' vector loads).
set(FSEMU_TSAN_FLAGS -fsanitize=thread -g1 -O1 -fno-builtin-memcpy -fno-builtin-memset
    -fno-builtin-memmove CACHE INTERNAL "")
set(FSEMU_SANITIZER_ENV
    "ASAN_OPTIONS=detect_leaks=0"
    "TSAN_OPTIONS=halt_on_error=1 history_size=4"
    CACHE INTERNAL "")

# TSan: the instruction models and the warp-collective intrinsics (src/model/, device.cpp: WMMA,
# ldmatrix, mma, wgmma, TMA tiles) are instrumented, so that what an ldmatrix or a WMMA load reads
# is an access of the thread that computes it (the last of its warp to arrive: ordered after the
# others'); their bookkeeping runs in the ignored scopes of sanitize.hpp.
set(fsemu_tsan_models ${fsemu_sources})
list(FILTER fsemu_tsan_models INCLUDE REGEX "/src/model/|/src/device.cpp$")
add_library(fsemu_tsan_models OBJECT ${fsemu_tsan_models})
target_include_directories(fsemu_tsan_models PRIVATE include ${CUDAToolkit_INCLUDE_DIRS})
target_compile_options(fsemu_tsan_models PRIVATE ${FSEMU_TSAN_FLAGS})

foreach(san asan tsan)
  string(TOUPPER ${san} SAN)
  set(sources ${fsemu_sources})
  if(san STREQUAL "tsan")  # the TSan runtime defines the access hooks' symbols itself
    list(FILTER sources EXCLUDE REGEX "/src/access_hooks.cpp$")
    list(FILTER sources EXCLUDE REGEX "/src/model/|/src/device.cpp$")
    list(APPEND sources $<TARGET_OBJECTS:fsemu_tsan_models>)
  endif()
  add_library(fsemu_${san} STATIC ${sources})
  target_include_directories(fsemu_${san} PUBLIC include ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(fsemu_${san} PUBLIC Boost::context)
  if(san STREQUAL "asan")
    target_compile_options(fsemu_${san} PRIVATE ${FSEMU_ASAN_FLAGS})
    target_link_options(fsemu_${san} INTERFACE -fsanitize=address)
  else()
    target_compile_definitions(fsemu_${san} PRIVATE FSEMU_TSAN=1)
    target_link_options(fsemu_${san} INTERFACE -fsanitize=thread)
    target_compile_options(fsemu_${san} PRIVATE -g1)
  endif()

  # flashsteps::common for the emulator, its objects as they are (host code; its fill kernels
  # need no checks), over the sanitizer's emulator.
  add_library(fs_emu_common_${san} STATIC $<TARGET_OBJECTS:fs_emu_common>)
  set_target_properties(fs_emu_common_${san} PROPERTIES LINKER_LANGUAGE CXX)
  target_include_directories(fs_emu_common_${san} PUBLIC ${PROJECT_SOURCE_DIR}/common/include)
  target_compile_definitions(fs_emu_common_${san} PUBLIC FLASHSTEPS_EMULATED_BUILD=1)
  target_link_libraries(fs_emu_common_${san} PUBLIC fsemu_${san})

  # The planted bugs.
  flashsteps_emulated_sources(planted "${FSEMU_SANITIZE_DIR}/planted.cu")
  add_executable(fsemu_planted_${san} ${planted})
  target_compile_options(fsemu_planted_${san} PRIVATE ${FSEMU_${SAN}_FLAGS})
  target_link_libraries(fsemu_planted_${san} PRIVATE fs_emu_common_${san})
  set_target_properties(fsemu_planted_${san} PROPERTIES
                        RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests/sanitize")
endforeach()

# fsemu_expect_report(<name> <what> <planted-binary> <argument> <pattern>...): CTest <name>
# passes only if the planted bug is reported with output matching every pattern.
function(fsemu_expect_report name what target arg)
  add_test(NAME ${name}
           COMMAND "${FSEMU_EXPECT_FAILURE}" "${what}" ${ARGN} --
                   $<TARGET_FILE:${target}> ${arg})
  set_tests_properties(${name} PROPERTIES LABELS "cpu;emu;sanitizer"
                       ENVIRONMENT "${FSEMU_SANITIZER_ENV}")
endfunction()
# A race: both accesses, each with its source line and its CUDA thread (the fibers' names).
fsemu_expect_report(emu.tsan.planted_race "a shared-memory race between two warps"
                    fsemu_planted_tsan race
                    "WARNING: ThreadSanitizer: data race"
                    "Read of size 4 at .* by thread T[0-9]+"
                    "warp_handoff.*planted.cu:33"
                    "warp_handoff.*planted.cu:35"
                    "'block \\(0, 0, 0\\), thread \\([0-9]+, 0, 0\\) = warp 1 lane [0-9]+'"
                    "'block \\(0, 0, 0\\), thread \\([0-9]+, 0, 0\\) = warp 0 lane [0-9]+'")
fsemu_expect_report(emu.asan.planted_shared_oob "a read past the dynamic shared memory"
                    fsemu_planted_asan shared-oob
                    "ERROR: AddressSanitizer: use-after-poison"
                    "shared_past_end.*planted.cu:42"
                    "fsemu: the emulator was running block \\(0, 0, 0\\), thread \\(63, 0, 0\\)"
                    "the address is shared memory 0x180, outside the block's dynamic shared memory 0x80 .. 0x180")
fsemu_expect_report(emu.asan.planted_global_oob "a read past a cudaMalloc'd buffer"
                    fsemu_planted_asan global-oob
                    "ERROR: AddressSanitizer: heap-buffer-overflow"
                    "global_past_end.*planted.cu:46"
                    # The allocation, in words every libasan prints: GCC 12 says "is located 0
                    # bytes to the right of 256-byte region [a,b)", GCC 14 (Debian 13) "is located
                    # 0 bytes after 256-byte region [a,b)". (No literal left bracket here: CMake
                    # would not split its list on the semicolons after one.)
                    "256-byte region .0x[0-9a-f]+,0x[0-9a-f]+\\)"
                    "fsemu: the emulator was running block \\(0, 0, 0\\), thread \\(63, 0, 0\\)")
# A plain load racing another warp's atomicAdd of the same shared float: reported, with both
# accesses (the atomic inside the emulator's atomicAdd, called from the kernel's line); atomics
# alone are not (emu.tsan.planted_atomics, below).
fsemu_expect_report(emu.tsan.planted_atomic_race "a plain load racing another warp's atomicAdd"
                    fsemu_planted_tsan atomic-race
                    "WARNING: ThreadSanitizer: data race"
                    "[Rr]ead of size 4 at .* by thread T[0-9]+"
                    "[Aa]tomic write of size 4"
                    "fsemu::atomic_add"
                    "shared_sum.*planted.cu:54"
                    "shared_sum.*planted.cu:55")
add_test(NAME emu.tsan.planted_atomics COMMAND fsemu_planted_tsan atomics)
set_tests_properties(emu.tsan.planted_atomics PROPERTIES
                     LABELS "cpu;emu;sanitizer" ENVIRONMENT "${FSEMU_SANITIZER_ENV}")
# The same handoff with a barrier: no report (the barrier's happens-before reaches TSan).
add_test(NAME emu.tsan.planted_synced COMMAND fsemu_planted_tsan synced)
set_tests_properties(emu.tsan.planted_synced PROPERTIES
                     LABELS "cpu;emu;sanitizer" ENVIRONMENT "${FSEMU_SANITIZER_ENV}")

# Blocks that wait on each other (emu/README.md): a block parked while another runs, no report.
add_test(NAME emu.tsan.planted_parked COMMAND fsemu_planted_tsan parked)
set_tests_properties(emu.tsan.planted_parked PROPERTIES
                     LABELS "cpu;emu;sanitizer" ENVIRONMENT "${FSEMU_SANITIZER_ENV}")

# The stages exist only once stages/CMakeLists.txt has run: their sanitizer builds are added at
# the end of the top-level directory.
function(_fsemu_add_sanitized_stages)
  get_property(stages GLOBAL PROPERTY FLASHSTEPS_STAGES)
  set(chosen ${FSEMU_SANITIZED_STAGES})
  if(chosen STREQUAL "all")
    set(chosen ${stages})
  endif()
  foreach(name IN LISTS chosen)
    if(NOT TARGET fs_emu_stage_${name})
      message(FATAL_ERROR "FSEMU_SANITIZED_STAGES: ${name} is not an emulated stage")
    endif()
    get_property(dir GLOBAL PROPERTY FLASHSTEPS_STAGE_DIR_${name})
    # What the sanitizers check is the kernels' accesses (emu/README.md, "Sanitizers"): kernels.cu
    # is compiled for each; the stage's other objects (its launcher: host code, no kernel) are the
    # plain emulated library's, as the planted faults reuse them (fsemu_stage_library_with). They
    # define no function that the sanitized kernels object also defines (nm of both, 00, 06c, 07d,
    # 09b: none), so no sanitized inline copy is replaced by a plain one at link time.
    set(kernels "${PROJECT_SOURCE_DIR}/${dir}/kernels.cu")
    flashsteps_emulated_sources(wrapped "${kernels}")
    fsemu_stage_objects_without(plain ${name} "${kernels}")
    foreach(san asan tsan)
      string(TOUPPER ${san} SAN)
      add_library(fs_emu_stage_${name}_${san} STATIC ${wrapped} "${plain}")
      add_dependencies(fs_emu_stage_${name}_${san} fs_emu_stage_${name})
      flashsteps_stage_target(fs_emu_stage_${name}_${san} ${name})
      target_compile_options(fs_emu_stage_${name}_${san} PRIVATE ${FSEMU_${SAN}_FLAGS})
      fsemu_one_case_build(fs_emu_stage_${name}_${san} "${FSEMU_SANITIZER_CASES}")
      if(san STREQUAL "asan")
        # A stage's ASan suite runs one small case (FSEMU_SANITIZER_CASES) in well under a second:
        # its kernels compile at -O0, in about a third of -O1's time (the emulator
        # under them keeps -O1). TSan's runs are longer, and keep -O1.
        target_compile_options(fs_emu_stage_${name}_${san} PRIVATE -O0)
      endif()
      target_link_libraries(fs_emu_stage_${name}_${san} PUBLIC fs_emu_common_${san})
      if(san STREQUAL "asan")  # (TSan's objects read the shim's text: precompiled, GCC 12 warns
        fsemu_precompiled_shim(fs_emu_stage_${name}_${san} ${san})  # in system headers there)
      endif()
      set(test test_emu_${name}_${san})
      add_executable(${test} $<TARGET_OBJECTS:fs_emu_gpu_suite_obj>)
      target_link_libraries(${test} PRIVATE fs_emu_stage_${name}_${san} flashsteps::catch2)
      _flashsteps_needs_ptxas_report(${name} ${test})
      set_target_properties(${test} PROPERTIES
                            RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests/sanitize")
      add_test(NAME emu.${san}.${name}
               COMMAND ${test} "${FSEMU_SANITIZER_CASES}" ${FLASHSTEPS_CATCH_ARGS})
      set_tests_properties(emu.${san}.${name} PROPERTIES
                           LABELS "cpu;emu;sanitizer" ENVIRONMENT "${FSEMU_SANITIZER_ENV}"
                           FAIL_REGULAR_EXPRESSION "${FLASHSTEPS_CATCH_FAIL};Sanitizer")
    endforeach()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${PROJECT_SOURCE_DIR}" CALL _fsemu_add_sanitized_stages)

# A one-case build asked for another variant refuses it, naming why: 03's ASan suite on an fp16 case.
function(_fsemu_add_one_case_refusal)
  if(TARGET test_emu_03_online_softmax_asan AND FSEMU_SANITIZER_CASES STREQUAL FSEMU_ONE_CASE)
    fsemu_expect_report(emu.one_case.other_variant_refused
                        "a one-case build refuses another variant's launch"
                        test_emu_03_online_softmax_asan "same inputs twice*"
                        "variant is not compiled in this build.*FSEMU_ONE_CASE")
  endif()
endfunction()
cmake_language(DEFER DIRECTORY "${PROJECT_SOURCE_DIR}" CALL _fsemu_add_one_case_refusal)
