# Installation: headers, the static library, a CMake package (find_package(flashcore) gives
# flashcore::flashcore) and a pkg-config file. The library's one CUDA dependency (static cudart)
# comes back through find_dependency(CUDAToolkit) in the package. The cuBLAS baseline
# (flashcore_unfused) is for the lab and the tests, and is not installed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/flashcore" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS flashcore EXPORT flashcoreTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
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
configure_file("${CMAKE_CURRENT_LIST_DIR}/flashcore.pc.in" "${CMAKE_CURRENT_BINARY_DIR}/flashcore.pc"
               @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/flashcore.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
