# bench/table/embed_stage_list.cmake — runs at build time (cmake -P): writes the build's stage
# list (stages.json) as a C++ string literal that fs_table's main.cpp includes, so fs_table knows
# the stages without the build folder (a bundle copies only the binary).
#
#   cmake -DIN=<build>/stages.json -DOUT=<dir>/stage_list.inc -P embed_stage_list.cmake
cmake_minimum_required(VERSION 3.25)
file(READ "${IN}" json)
if(json MATCHES "\\)fs_stage_list\"")
  message(FATAL_ERROR "${IN} holds the raw string's delimiter")
endif()
file(CONFIGURE OUTPUT "${OUT}" CONTENT "// Generated from @IN@; do not edit.
R\"fs_stage_list(@json@)fs_stage_list\"
" @ONLY)
