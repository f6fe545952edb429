# book/check_html.cmake — runs after Doxygen (cmake -DHTML_DIR=<dir> -P check_html.cmake).
#
# Some Markdown mistakes produce no Doxygen warning but a broken page: a \ref whose quoted text
# spans a line break, for instance, leaves the rest of the page as raw Doxygen internals
# ("@section ...", "\_form#12" instead of a formula). Those markers never belong in the HTML, so
# finding one fails the build like a warning does.
cmake_minimum_required(VERSION 3.25)

if(NOT IS_DIRECTORY "${HTML_DIR}")
  message(FATAL_ERROR "check_html.cmake: pass -DHTML_DIR=<the book's html folder>")
endif()

file(GLOB pages "${HTML_DIR}/*.html")
if(NOT pages)
  message(FATAL_ERROR "book: Doxygen wrote no HTML pages in ${HTML_DIR}")
endif()
set(broken "")
foreach(page IN LISTS pages)
  file(READ "${page}" text)
  if(text MATCHES "(\\\\_form#[0-9]+|@_fakenl|@(sub)*section [a-z]|@verbatim|@endverbatim|<p >\\*\\*|</a>\\*\\*)")
    get_filename_component(name "${page}" NAME)
    list(APPEND broken "${name} ('${CMAKE_MATCH_1}')")
  endif()
endforeach()
if(broken)
  list(JOIN broken ", " broken)
  message(FATAL_ERROR "book: Doxygen left unprocessed markup in ${broken}. Look for a \\ref or "
                      "\\subpage whose quoted text spans a line break, an unclosed \\f$ or code span, "
                      "or bold (**) around a \\ref, code or math, in the chapter before that "
                      "point.")
endif()
