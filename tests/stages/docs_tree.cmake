# tests/stages/docs_tree.cmake — README's stage table and the book's front page show the stage
# tree by hand; this fails when either disagrees with the list the build wrote (stages.json).
#
#   cmake -DSTAGE_LIST=<build>/stages.json -DREADME=<src>/README.md
#         -DINDEX=<src>/book/chapters/index.md -P docs_tree.cmake
#
# README, under "## The stages": one row per stage, then one per baseline, in the list's order:
#   | NN | `<dir>` | <parent's NN, or — > | ...
# index.md, under "# The stages": one row per stage, in the list's order:
#   | `<name>` | <`parent`, or — > | ...
cmake_minimum_required(VERSION 3.25)
foreach(var STAGE_LIST README INDEX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "docs_tree.cmake: pass -D${var}=...")
  endif()
endforeach()
include("${CMAKE_CURRENT_LIST_DIR}/../../stages/flashsteps_add_stage.cmake")
flashsteps_read_stage_list("${STAGE_LIST}" list)

# What each file must show, row by row ("|"-separated cells).
set(readme_rows "")
set(index_rows "")
foreach(name IN LISTS list_STAGES)
  set(parent "${list_PARENT_${name}}")
  # A stage's number: its name up to the first '_' (06c_swizzle: 06c).
  string(REGEX REPLACE "_.*" "" nn "${name}")
  if(parent STREQUAL "")
    set(parent_nn "—")
    set(parent_code "—")
  else()
    string(REGEX REPLACE "_.*" "" parent_nn "${parent}")
    set(parent_code "`${parent}`")
  endif()
  list(APPEND readme_rows "${nn}|`${list_DIR_${name}}`|${parent_nn}")
  list(APPEND index_rows "`${name}`|${parent_code}")
endforeach()
foreach(name IN LISTS list_BASELINES)
  list(APPEND readme_rows "—|`${list_DIR_${name}}`|—")
endforeach()

# The table rows of the section that starts with the line `heading`: the first `cells` cells of
# each row after the table's separator line, stripped.
function(section_rows file heading cells out)
  file(STRINGS "${file}" lines ENCODING UTF-8)
  set(in_section FALSE)
  set(rows "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^#")
      if(in_section)
        break()
      endif()
      if(line MATCHES "^${heading}")
        set(in_section TRUE)
      endif()
      continue()
    endif()
    if(NOT in_section OR NOT line MATCHES "^\\|" OR line MATCHES "^\\|[-:| ]+$")
      continue()
    endif()
    string(REGEX REPLACE "^\\| *" "" line "${line}")
    string(REPLACE "|" ";" row "${line}")
    set(kept "")
    foreach(k RANGE 1 ${cells})
      list(POP_FRONT row cell)
      string(STRIP "${cell}" cell)
      list(APPEND kept "${cell}")
    endforeach()
    list(JOIN kept "|" kept)
    list(APPEND rows "${kept}")
  endforeach()
  set(${out} "${rows}" PARENT_SCOPE)
endfunction()

function(compare file heading cells expected)
  section_rows("${file}" "${heading}" ${cells} got)
  list(FILTER got EXCLUDE REGEX "^stage\\|")  # the header row
  if(NOT got STREQUAL expected)
    string(REPLACE ";" "\n  " want "${expected}")
    string(REPLACE ";" "\n  " have "${got}")
    message(SEND_ERROR "${file}: the stage table under '${heading}' does not show the tree of "
                       "${STAGE_LIST}.\nExpected (first ${cells} cells of each row):\n  ${want}\n"
                       "Found:\n  ${have}")
  endif()
endfunction()
compare("${README}" "## The stages" 3 "${readme_rows}")
compare("${INDEX}" "# The stages" 2 "${index_rows}")
