# book/check_html.cmake — runs after Doxygen (cmake -DHTML_DIR=<dir> -P check_html.cmake).
#
# Some Markdown mistakes produce no Doxygen warning but a broken page: a \ref whose quoted text
# spans a line break, for instance, leaves the rest of the page as raw Doxygen internals
# ("@section ...", "\_form#12" instead of a formula), and a formula or a \ref inside "double
# quotes" is printed as typed. Those never belong in the HTML, so finding one fails the build like
# a warning does. The checks, per page:
#   - Doxygen internals anywhere in the page;
#   - in the text (outside code boxes): raw \f$ or \f[, a \( or \[ that does not open a formula
#     MathJax typesets (Doxygen writes every formula as \(...\) or \[...\]; MathJax leaves one in
#     a code span, or one left open, as typed), bold ** left as asterisks (see below), \ref or @ref;
#   - a code box with C++ keywords and no highlighting at all (a source Doxygen did not parse);
#   - a script, stylesheet or font loaded from another host, or a local script that is missing
#     from the folder (the book must read offline, and after the folder is moved).
cmake_minimum_required(VERSION 3.25)

if(NOT IS_DIRECTORY "${HTML_DIR}")
  message(FATAL_ERROR "check_html.cmake: pass -DHTML_DIR=<the book's html folder>")
endif()

file(GLOB pages "${HTML_DIR}/*.html")
if(NOT pages)
  message(FATAL_ERROR "book: Doxygen wrote no HTML pages in ${HTML_DIR}")
endif()

set(broken "")
set(count 0)
# Appends "<page>: <what> at '<context>'" to `broken`; `at` is the offset of the finding in `text`.
function(report page what text at)
  math(EXPR from "${at} - 40")
  if(from LESS 0)
    set(from 0)
  endif()
  string(SUBSTRING "${text}" ${from} 100 context)
  string(REGEX REPLACE "[\r\n\t ]+" " " context "${context}")
  string(APPEND broken "\n  ${page}: ${what}, at '${context}'")
  math(EXPR count "${count} + 1")
  set(broken "${broken}" PARENT_SCOPE)
  set(count ${count} PARENT_SCOPE)
endfunction()

# Reports the first match of `regex` in `text` (one finding per kind and page is enough to fix).
function(find_first page what regex text)
  if(text MATCHES "${regex}")
    string(FIND "${text}" "${CMAKE_MATCH_0}" at)
    report("${page}" "${what}" "${text}" ${at})
    set(broken "${broken}" PARENT_SCOPE)
    set(count ${count} PARENT_SCOPE)
  endif()
endfunction()

set(fragment_open "<div class=\"fragment\">")
set(fragment_close "</div><!-- fragment -->")
set(cpp_keyword
    "[^a-zA-Z_](const|constexpr|template|return|void|int|float|auto|struct|for|if|using)[^a-zA-Z_]")
set(unhighlighted
    "a code box without syntax highlighting (is its extension in Doxyfile.in's EXTENSION_MAPPING?)")
# A formula as Doxygen writes it: \( up to the first \), or \[ up to the first \], with no tag in
# between (Doxygen writes a formula's < as &lt;).
set(inline_formula "\\\\\\(([^\\\\<]|\\\\[^)])*\\\\\\)")
set(display_formula "\\\\\\[([^\\\\<]|\\\\[^]])*\\\\\\]")

foreach(path IN LISTS pages)
  get_filename_component(page "${path}" NAME)
  file(READ "${path}" html)

  find_first("${page}" "Doxygen internals"
             "(\\\\_form#[0-9]+|@_fakenl|@(sub)*section [a-z]|@verbatim|@endverbatim)" "${html}")

  # Code boxes: taken out of the text; one with C++ keywords must be highlighted.
  set(text "")
  set(rest "${html}")
  while(TRUE)
    string(FIND "${rest}" "${fragment_open}" open)
    if(open EQUAL -1)
      string(APPEND text "${rest}")
      break()
    endif()
    string(SUBSTRING "${rest}" 0 ${open} before)
    string(APPEND text "${before}")
    string(SUBSTRING "${rest}" ${open} -1 rest)
    string(FIND "${rest}" "${fragment_close}" close)
    if(close EQUAL -1)
      report("${page}" "a code box that never closes" "${rest}" 0)
      break()
    endif()
    string(SUBSTRING "${rest}" 0 ${close} box)
    string(LENGTH "${fragment_close}" close_length)
    math(EXPR after "${close} + ${close_length}")
    string(SUBSTRING "${rest}" ${after} -1 rest)
    string(FIND "${box}" "<span class=\"" highlighted)
    # Keywords in comments and strings count for nothing.
    string(REGEX REPLACE "<span class=\"(comment|stringliteral|charliteral)\">[^<]*</span>" ""
                         box_text "${box}")
    string(REGEX REPLACE "<[^>]*>" "" box_text "${box_text}")
    if(highlighted EQUAL -1 AND box_text MATCHES "${cpp_keyword}")
      string(FIND "${html}" "${box}" at)
      report("${page}" "${unhighlighted}" "${html}" ${at})
    endif()
  endwhile()

  # The text: no scripts, no preformatted blocks; code spans stay, where MathJax typesets nothing.
  string(REGEX REPLACE "<script[^<]*</script>" "" text "${text}")
  string(REGEX REPLACE "<pre[^<]*</pre>" "" text "${text}")
  string(REGEX REPLACE "<code>[^<]*(\\\\\\(|\\\\f[$[])" "<code>RAW_FORMULA_IN_CODE" text "${text}")
  string(REGEX REPLACE "${inline_formula}" "" text "${text}")
  string(REGEX REPLACE "<p class=\"formulaDsp\">[\r\n ]*${display_formula}" "" text "${text}")
  find_first("${page}" "a formula in a code span, printed as typed" "RAW_FORMULA_IN_CODE" "${text}")
  find_first("${page}" "a raw \\f$ or \\f[ (a formula inside \"double quotes\"?)" "\\\\f[$[]"
             "${text}")
  find_first("${page}" "a \\( or \\[ that opens no formula" "\\\\[([]" "${text}")
  find_first("${page}" "bold ** left as asterisks (around a \\ref, code or math?)" "\\*\\*"
             "${text}")
  find_first("${page}" "an unresolved \\ref" "[\\\\@]ref[ {]" "${text}")

  # Everything the page loads comes from this folder.
  find_first("${page}" "a script from another host" "<script[^>]* src=\"([a-z]+:)?//[^\"]*\""
             "${html}")
  find_first("${page}" "a stylesheet or other resource from another host"
             "<link[^>]* href=\"([a-z]+:)?//[^\"]*\"" "${html}")
  string(REGEX MATCHALL "<script[^>]* src=\"[^\":]*\"" scripts "${html}")
  foreach(script IN LISTS scripts)
    string(REGEX REPLACE ".* src=\"([^\"?]*).*" "\\1" src "${script}")
    if(NOT EXISTS "${HTML_DIR}/${src}")
      string(FIND "${html}" "${script}" at)
      report("${page}" "a script that is not in the folder (${src})" "${html}" ${at})
    endif()
  endforeach()
endforeach()

file(GLOB stylesheets "${HTML_DIR}/*.css")
foreach(path IN LISTS stylesheets)
  get_filename_component(page "${path}" NAME)
  file(READ "${path}" css)
  find_first("${page}" "a stylesheet import or font from another host"
             "(@import|url\\()[ \"']*([a-z]+:)?//" "${css}")
endforeach()

if(count GREATER 0)
  message(FATAL_ERROR "book: ${count} problem(s) in the HTML that Doxygen did not warn about:"
                      "${broken}")
endif()
