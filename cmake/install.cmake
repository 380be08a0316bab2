# Installation: headers, the static library, a CMake package (find_package(flashcore) gives
# flashcore::flashcore, and flashcore::flex_kernels for functors of one's own) and a pkg-config file. The library's one CUDA dependency (static cudart)
# comes back through find_dependency(CUDAToolkit) in the package. The cuBLAS baseline
# (flashcore_unfused) is for the lab and the tests, and is not installed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/flashcore" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS flashcore flashcore_flex_kernels EXPORT flashcoreTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
# The flex kernel templates and CuTe, for flashcore::flex_kernels (cmake/kernel_headers.cmake).
flashcore_install_kernel_headers("${PROJECT_SOURCE_DIR}/src" "${FLASHCORE_CUTLASS_INCLUDE}"
                                 "${CMAKE_INSTALL_INCLUDEDIR}" Unspecified)
set(flashcore_package_dir "${CMAKE_INSTALL_LIBDIR}/cmake/flashcore")
install(EXPORT flashcoreTargets NAMESPACE flashcore:: DESTINATION "${flashcore_package_dir}")
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/flashcoreConfig.cmake.in"
                              "${CMAKE_CURRENT_BINARY_DIR}/flashcoreConfig.cmake"
                              INSTALL_DESTINATION "${flashcore_package_dir}")
# 0.x releases may break the API between minor versions.
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/flashcoreConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/flashcoreConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/flashcoreConfigVersion.cmake"
        DESTINATION "${flashcore_package_dir}")
# The pkg-config file finds its prefix from where it lies (${pcfiledir}), so that an install tree
# made with `cmake --install --prefix` or moved elsewhere still points at itself. Its Cflags carry
# the CUDA include directory (attention.hpp includes cuda_runtime_api.h); its Libs.private the
# static CUDA runtime and the C++ runtime, which a C program using flashcore.h needs too.
string(REGEX REPLACE "[^/]+" ".." flashcore_pc_up "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(flashcore_pc_prefix "\${pcfiledir}/${flashcore_pc_up}")
foreach(kind IN ITEMS lib include)
  string(TOUPPER ${kind} upper)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${upper}DIR}")
    set(flashcore_pc_${kind}dir "${CMAKE_INSTALL_${upper}DIR}")
  else()
    set(flashcore_pc_${kind}dir "\${prefix}/${CMAKE_INSTALL_${upper}DIR}")
  endif()
endforeach()
list(TRANSFORM CUDAToolkit_INCLUDE_DIRS PREPEND "-I" OUTPUT_VARIABLE flashcore_pc_cuda_cflags)
list(JOIN flashcore_pc_cuda_cflags " " flashcore_pc_cuda_cflags)
configure_file("${CMAKE_CURRENT_LIST_DIR}/flashcore.pc.in" "${CMAKE_CURRENT_BINARY_DIR}/flashcore.pc"
               @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/flashcore.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
