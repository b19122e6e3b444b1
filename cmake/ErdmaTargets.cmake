# Shared build settings, attached to targets through INTERFACE libraries instead of global flags.

# Warnings every first-party target compiles with.
add_library(project_warnings INTERFACE)
target_compile_options(project_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wold-style-cast>
  $<$<BOOL:${WERROR}>:-Werror>)

# Sanitizers (SANITIZE=address,undefined), on compile and link lines alike. With ERDMA_FUZZ (clang)
# every first-party target also gets libFuzzer's coverage instrumentation.
add_library(project_sanitizers INTERFACE)
if(SANITIZE)
  target_compile_options(project_sanitizers INTERFACE
    -fsanitize=${SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(project_sanitizers INTERFACE -fsanitize=${SANITIZE})
endif()
if(ERDMA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ERDMA_FUZZ needs clang (e.g. -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14)")
  endif()
  target_compile_options(project_sanitizers INTERFACE -fsanitize=fuzzer-no-link)
endif()
# Source-based line coverage (clang), for test/fuzz/coverage.sh.
if(ERDMA_COVERAGE)
  target_compile_options(project_sanitizers INTERFACE -fprofile-instr-generate -fcoverage-mapping)
  target_link_options(project_sanitizers INTERFACE -fprofile-instr-generate)
endif()

# erdma_settings(<target>): the warnings, sanitizers and generated-header path for a first-party target.
function(erdma_settings target)
  target_link_libraries(${target} PRIVATE project_warnings project_sanitizers)
  target_include_directories(${target} PRIVATE "${PROJECT_BINARY_DIR}/generated")
endfunction()

# erdma_test(<name> SOURCES ... LIBS ... [LABELS ...] [SKIP_RETURN_CODE n]): one doctest executable,
# discovered by ctest. A test that cannot run here (no SMC, no root) exits with SKIP_RETURN_CODE
# after printing why (test/skip.hpp), and ctest reports it as skipped.
function(erdma_test name)
  cmake_parse_arguments(ARG "" "SKIP_RETURN_CODE;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} doctest::doctest erdma_test_main)
  erdma_settings(${name})
  # Test headers are included as "test/...", whatever the suite links (test/skip.hpp in every one).
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}")
  target_compile_definitions(${name} PRIVATE ERDMA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set(props "")
  if(ARG_LABELS)
    list(APPEND props LABELS "${ARG_LABELS}")
  endif()
  if(ARG_SKIP_RETURN_CODE)
    list(APPEND props SKIP_RETURN_CODE ${ARG_SKIP_RETURN_CODE})
  endif()
  if(ARG_TIMEOUT)
    list(APPEND props TIMEOUT ${ARG_TIMEOUT})
  endif()
  if(props)
    list(PREPEND props PROPERTIES)
  endif()
  doctest_discover_tests(${name} TEST_PREFIX "${name}: " ${props})
endfunction()
