# cmake/AllocsimWarnings.cmake -- flags live on one INTERFACE target that our
# targets link PRIVATE, so they never leak to consumers or third-party code.
add_library(allocsim_options INTERFACE)
target_compile_options(allocsim_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
  -Wmissing-prototypes -Wconversion
  $<$<BOOL:${ALLOCSIM_WERROR}>:-Werror>)
target_compile_definitions(allocsim_options INTERFACE
  _GNU_SOURCE ALLOCSIM_VERSION="${PROJECT_VERSION}")
if(ALLOCSIM_SANITIZE)
  target_compile_options(allocsim_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
  target_link_options(allocsim_options INTERFACE -fsanitize=address,undefined)
endif()
