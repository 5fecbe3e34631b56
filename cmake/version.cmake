# Writes OUT (a header for the CLI) with the project version and the git revision of SRC, run at every build so that
# a new commit shows without reconfiguring. configure_file rewrites it only when it changes: nothing recompiles else.
# A source tree that is not a git checkout (a release tarball, a copied folder) says so; it is not an error.
find_program(GIT git)
if(GIT)
  # Only SRC's own repository: a tree unpacked inside another checkout must not take that one's revision.
  execute_process(COMMAND ${GIT} -C "${SRC}" rev-parse --show-toplevel OUTPUT_VARIABLE top ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  file(REAL_PATH "${SRC}" src_real)
  if(top AND EXISTS "${top}")
    file(REAL_PATH "${top}" top)
  endif()
  if(top STREQUAL src_real)
    execute_process(COMMAND ${GIT} -C "${SRC}" rev-parse --short=7 HEAD OUTPUT_VARIABLE rev ERROR_QUIET
                    RESULT_VARIABLE rev_status OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
endif()
if(NOT GIT)
  set(FKV_REVISION "revision unknown: git not found")
elseif(rev_status EQUAL 0 AND rev)
  # Tracked files changed since the commit: the binary is not that commit's.
  execute_process(COMMAND ${GIT} -C "${SRC}" diff --quiet HEAD -- RESULT_VARIABLE dirty ERROR_QUIET)
  set(FKV_REVISION "git ${rev}")
  if(NOT dirty EQUAL 0)
    string(APPEND FKV_REVISION ", modified")
  endif()
else()
  set(FKV_REVISION "not a git checkout")
endif()
file(WRITE "${OUT}.in" "#define FKV_VERSION_STRING \"flatkv ${VERSION} (${FKV_REVISION})\"\n")
configure_file("${OUT}.in" "${OUT}" COPYONLY)
