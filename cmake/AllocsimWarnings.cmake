# cmake/AllocsimWarnings.cmake -- flags live on one INTERFACE target that our
# targets link PRIVATE, so they never leak to consumers or third-party code.
add_library(allocsim_options INTERFACE)
target_compile_options(allocsim_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
  -Wmissing-prototypes -Wconversion
  $<$<BOOL:${ALLOCSIM_WERROR}>:-Werror>)
target_compile_definitions(allocsim_options INTERFACE
  _GNU_SOURCE ALLOCSIM_VERSION="${PROJECT_VERSION}")
# The fuzz build (tests/fuzz, scripts/fuzz.sh): every library gets
# libFuzzer's coverage instrumentation and ASan + UBSan; the targets
# themselves link libFuzzer's main.
if(ALLOCSIM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ALLOCSIM_FUZZ needs clang (libFuzzer): "
                        "-DCMAKE_C_COMPILER=clang")
  endif()
  target_compile_options(allocsim_options INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined
    -fsanitize-coverage-ignorelist=${PROJECT_SOURCE_DIR}/tests/fuzz/coverage-ignorelist.txt
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
  target_link_options(allocsim_options INTERFACE -fsanitize=address,undefined)
elseif(ALLOCSIM_SANITIZE)
  target_compile_options(allocsim_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
  target_link_options(allocsim_options INTERFACE -fsanitize=address,undefined)
endif()
