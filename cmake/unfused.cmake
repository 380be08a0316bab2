# The unfused baseline is the only cuBLAS user, so it is a target of its own and the core library
# needs no cuBLAS. flashcore_unfused (the lab, the tests) links it whole-archive so that the static
# initializer in api/unfused_plug.cpp plugs it into the registry; the Python package links
# flashcore_unfused_impl into a module of its own and plugs it from there on demand. Included by
# src/CMakeLists.txt, and by cmake/prebuilt.cmake, where flashcore::flashcore is an installed core
# library.
add_library(flashcore_unfused_impl STATIC "${PROJECT_SOURCE_DIR}/src/baseline/unfused.cu"
                                          "${PROJECT_SOURCE_DIR}/src/api/unfused_plug.cpp")
target_include_directories(flashcore_unfused_impl PRIVATE "${PROJECT_SOURCE_DIR}/src")
target_link_libraries(flashcore_unfused_impl PUBLIC flashcore::flashcore CUDA::cublas
  PRIVATE flashcore_cuda_flags)
add_library(flashcore_unfused INTERFACE)
target_link_libraries(flashcore_unfused INTERFACE
  "$<LINK_LIBRARY:WHOLE_ARCHIVE,flashcore_unfused_impl>")
