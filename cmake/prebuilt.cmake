# A Python build that links a flashcore built and installed before (cmake --install of a build of
# this same source tree) instead of compiling every kernel again: scripts/test.sh passes its C++
# build's install tree here, so CI compiles each kernel once. The package then holds the kernels,
# architectures and pruning of that build. Only the nanobind modules and the unfused baseline
# (cmake/unfused.cmake, not installed) are compiled. `pip install .` leaves
# FLASHCORE_PREBUILT_PREFIX empty and builds the library itself.
if(NOT FLASHCORE_BUILD_PYTHON OR FLASHCORE_BUILD_TESTS OR FLASHCORE_BUILD_BENCH)
  message(FATAL_ERROR "FLASHCORE_PREBUILT_PREFIX is for the Python package alone: set "
                      "FLASHCORE_BUILD_PYTHON=ON, FLASHCORE_BUILD_TESTS=OFF and "
                      "FLASHCORE_BUILD_BENCH=OFF")
endif()
# The internal headers the modules include (src/api, src/baseline) must match the library's, so
# only an install of this very version is taken; and only from FLASHCORE_PREBUILT_PREFIX, not
# from where an earlier configure of this build directory found one.
unset(flashcore_DIR CACHE)
find_package(flashcore ${PROJECT_VERSION} EXACT CONFIG REQUIRED
             PATHS "${FLASHCORE_PREBUILT_PREFIX}" NO_DEFAULT_PATH)
message(STATUS "flashcore: linking the prebuilt library of ${flashcore_DIR}; "
               "no kernel is compiled here")
include("${CMAKE_CURRENT_LIST_DIR}/unfused.cmake")
