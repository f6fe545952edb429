# stages/10c_gqa_pack/bytes-read.cmake — the packing in the emulator's global sector counts (CTest
# emu.10c_gqa_pack.bytes_read): global bytes read by 10c and by its parent 10b at one GQA decode
# shape, each from its emulated runner's --profile, every block emulated, one split forced
# (FLASHSTEPS_KV_SPLITS=1, so both read through the attention kernel alone, no partials).
#
#   cmake -DPACKED=<stage10c emulated runner> -DPARENT=<stage10b emulated runner>
#         -P stages/10c_gqa_pack/bytes-read.cmake
#
# Bytes read = 32 x (the sectors cp.async reads + the sectors of LDG), summed over the launches.
# The shape: B 1, H 8 over H_kv 2 (groups of 4), Sq 1, a full cache of 1024 keys, D 64, fp16.
# Expected, from the shape alone: K and V of the 2 K/V heads, 2 x 2 x 1024 x 64 x 2 bytes =
# 512 KiB, read once by 10c and once per query head by 10b (4 times: 2 MiB); Q, 8 rows of 128
# bytes, read once by both. So 10b / 10c = (4 KV + Q) / (KV + Q) = 3.994 here: it falls short of
# the group size by (group - 1) Q / (KV + Q), Q's share, which is 0.2% of what 10c reads at this
# shape (at a real cache of 1k-32k keys and D 128 it is smaller still). Tolerance: the ratio in
# [0.95 x group, group], and 10c's bytes in [KV + Q, 1.05 x (KV + Q)]: 5% leaves room for Q and
# sector rounding, while a block that read its K/V head once for each of two halves of the group
# (a ratio of 2) or a second time (10c at 2 KV) fails both.
# Shown failing with the parent in place of 10c (-DPACKED=<stage10b runner>: ratio 1).
#
# -DCOMMITTED=<file>: also fail unless the counts are those the file records (bytes_read.txt, which
# the book's chapter shows); -DWRITE=<file> writes that file instead (from the repository root:
#   cmake -DPACKED=build/cpu/stages/emulated/stage10c -DPARENT=build/cpu/stages/emulated/stage10b
#         -DWRITE=stages/10c_gqa_pack/bytes_read.txt -P stages/10c_gqa_pack/bytes-read.cmake).
cmake_minimum_required(VERSION 3.20)
foreach(var PACKED PARENT)
  if(NOT EXISTS "${${var}}")
    message(FATAL_ERROR "bytes-read.cmake: -D${var}=<emulated runner> is required (got '${${var}}')")
  endif()
endforeach()

set(batch 1)
set(heads 8)
set(heads_kv 2)
set(seq_q 1)
set(seq_kv 1024)
set(dim 64)
set(elem 2)  # bytes of fp16
math(EXPR group "${heads} / ${heads_kv}")
math(EXPR kv_bytes "2 * ${batch} * ${heads_kv} * ${seq_kv} * ${dim} * ${elem}")
math(EXPR q_bytes "${batch} * ${heads} * ${seq_q} * ${dim} * ${elem}")
math(EXPR least "${kv_bytes} + ${q_bytes}")

set(ENV{FLASHSTEPS_KV_SPLITS} 1)
# bytes_read(<runner> <out var>): runs the runner with --profile and sums its read sectors x 32.
function(bytes_read runner out)
  execute_process(
    COMMAND "${runner}" --batch ${batch} --heads ${heads} --heads-kv ${heads_kv} --seq ${seq_q}
            --seq-kv ${seq_kv} --dim ${dim} --dtype fp16 --iters 1 --warmup 0 --no-peak --profile
    OUTPUT_VARIABLE log ERROR_VARIABLE log RESULT_VARIABLE rc)
  get_filename_component(name "${runner}" NAME)
  if(NOT rc EQUAL 0 OR NOT log MATCHES "heads: PASS")
    message(FATAL_ERROR "bytes-read.cmake: ${name} failed (exit ${rc}):\n${log}")
  endif()
  set(sectors 0)
  string(REGEX MATCHALL "global\\.(cp_async|ld)\\.sectors +[0-9]+" lines "${log}")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE ".* ([0-9]+)$" "\\1" n "${line}")
    math(EXPR sectors "${sectors} + ${n}")
  endforeach()
  math(EXPR bytes "32 * ${sectors}")
  string(REGEX MATCHALL "grid \\([0-9, ]+\\)" grids "${log}")
  string(REPLACE ";" ", " grids "${grids}")
  set(line "${name}: ${bytes} bytes read (${sectors} sectors of 32 bytes), ${grids}")
  message(STATUS "${line}")
  set(${out} ${bytes} PARENT_SCOPE)
  set(${out}_line "${line}" PARENT_SCOPE)
endfunction()

bytes_read("${PACKED}" packed)
bytes_read("${PARENT}" parent)
message(STATUS "shape: B ${batch}, H ${heads} / H_kv ${heads_kv} (group ${group}), Sq ${seq_q}, "
               "Skv ${seq_kv}, D ${dim}: K/V ${kv_bytes} bytes, Q ${q_bytes}")
math(EXPR ratio_x1000 "1000 * ${parent} / ${packed}")
math(EXPR whole "${ratio_x1000} / 1000")
math(EXPR frac "${ratio_x1000} % 1000 + 1000")
string(SUBSTRING "${frac}" 1 3 frac)
message(STATUS "parent / packed = ${whole}.${frac} (group ${group}, at least 0.95 x group)")

# What the chapter shows: the emulator's counts (no GPU measurement), every number from the runs.
string(CONCAT report
  "emulated (fsemu, every block, FLASHSTEPS_KV_SPLITS=1), written by "
  "stages/10c_gqa_pack/bytes-read.cmake\n"
  "shape: B ${batch}, H ${heads} / H_kv ${heads_kv} (group ${group}), Sq ${seq_q}, "
  "Skv ${seq_kv} (full cache), D ${dim}, fp16\n"
  "K and V of the ${heads_kv} K/V heads once: ${kv_bytes} bytes; Q: ${q_bytes} bytes\n"
  "${parent_line}\n"
  "${packed_line}\n"
  "10b / 10c: ${whole}.${frac} bytes read (group ${group})\n")
if(DEFINED WRITE)
  file(WRITE "${WRITE}" "${report}")
  message(STATUS "wrote ${WRITE}")
endif()

set(failed "")
math(EXPR lhs "100 * ${parent}")
math(EXPR rhs "95 * ${group} * ${packed}")
math(EXPR top "${group} * ${packed}")
if(lhs LESS rhs OR parent GREATER top)
  string(APPEND failed "the parent reads ${ratio_x1000}/1000 times the packed stage's bytes, not "
         "within [0.95, 1] x the group size ${group}\n")
endif()
math(EXPR lhs "100 * ${packed}")
math(EXPR rhs "105 * ${least}")
if(packed LESS least OR lhs GREATER rhs)
  string(APPEND failed "the packed stage reads ${packed} bytes, not within [1, 1.05] x ${least} "
         "(K and V of the K/V heads once, and Q)\n")
endif()
if(DEFINED COMMITTED)
  file(READ "${COMMITTED}" committed)
  if(NOT committed STREQUAL report)
    string(APPEND failed "${COMMITTED} records other counts than these (regenerate it with -DWRITE, "
           "see the top of this file):\n${committed}\n--- now:\n${report}")
  endif()
endif()
if(failed)
  message(FATAL_ERROR "bytes-read.cmake: FAIL\n${failed}")
endif()
message(STATUS "bytes-read: PASS")
