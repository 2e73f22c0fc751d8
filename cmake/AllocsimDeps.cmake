# cmake/AllocsimDeps.cmake -- GSL::gsl, SQLite3::SQLite3, cmocka::cmocka,
# and the decompressors for imported logs: PkgConfig::ZSTD, ZLIB::ZLIB.
find_package(GSL 2.6 REQUIRED)
find_package(SQLite3 REQUIRED)
if(NOT TARGET SQLite3::SQLite3)
  add_library(SQLite3::SQLite3 ALIAS SQLite::SQLite3)
endif()
find_package(Threads REQUIRED)
# heaptrack compresses its data files with zstd, or gzip without it
# (traces/compressed.c); Debian's libzstd-dev ships a pkg-config file only.
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_package(ZLIB REQUIRED)
# Call sites: libdw (elfutils) symbolises them in reports
# (analysis/symbolize.c); Debian's libdw-dev ships a pkg-config file.
pkg_check_modules(LIBDW REQUIRED IMPORTED_TARGET libdw)
if(BUILD_TESTING)
  # cmocka >= 1.1.6 exports cmocka::cmocka; Debian 12 ships 1.1.5, whose
  # config file only sets CMOCKA_INCLUDE_DIR / CMOCKA_LIBRARIES.
  find_package(cmocka CONFIG REQUIRED)
  if(NOT TARGET cmocka::cmocka)
    add_library(cmocka::cmocka INTERFACE IMPORTED)
    target_include_directories(cmocka::cmocka INTERFACE ${CMOCKA_INCLUDE_DIR})
    target_link_libraries(cmocka::cmocka INTERFACE ${CMOCKA_LIBRARIES})
  endif()
endif()
