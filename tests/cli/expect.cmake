# cmake -DCMD="<exe>;<args...>" -DRC=<expected exit code> -DTEXT=<expected in the output>
#       [-DSKIP_IF_GPU=1] -P expect.cmake
# Runs the command and checks its exit code and that its output names the problem: TEXT may be a
# list, each of whose items must appear.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(SKIP_IF_GPU AND rc EQUAL 0)
  message("SKIPPED: a GPU is present; this test is for machines without one")
  return()
endif()
if(NOT rc EQUAL RC)
  message(FATAL_ERROR "expected exit code ${RC}, got ${rc}")
endif()
foreach(text IN LISTS TEXT)
  string(FIND "${out}${err}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected the output to contain '${text}'")
  endif()
endforeach()
