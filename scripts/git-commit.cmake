# Writes OUT, a header defining CHUNKINV_GIT_COMMIT_STR as the commit of
# the checkout at SRC (12 hex digits; empty outside a checkout). Run at
# every build (CMakeLists.txt's chunkinv_git_commit target), not only at
# configure time, so that a report's meta.git_commit names the commit the
# binary was built from; the header is rewritten only when the commit
# changes, so an unchanged commit rebuilds nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}"
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(text "#define CHUNKINV_GIT_COMMIT_STR \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
