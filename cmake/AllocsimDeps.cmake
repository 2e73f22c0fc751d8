# cmake/AllocsimDeps.cmake -- GSL::gsl, SQLite3::SQLite3, cmocka::cmocka.
find_package(GSL 2.6 REQUIRED)
find_package(SQLite3 REQUIRED)
if(NOT TARGET SQLite3::SQLite3)
  add_library(SQLite3::SQLite3 ALIAS SQLite::SQLite3)
endif()
find_package(Threads REQUIRED)
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
