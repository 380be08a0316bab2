# The kernel templates a program of its own instantiates with its own functors (docs/flex.md,
# "Functors of your own"): api/run_flex.cuh and api/run_flex_sm90.cuh (the sm80 and sm90 flex
# kernels) and every header of src/ they include, and the CuTe / CUTLASS headers they need. They are
# installed as they lie in src/ (the files are not copied into include/), under
# include/flashcore/kernels/, so that their "common/...", "sm80/..." includes resolve
# unchanged; CuTe goes to include/flashcore/cutlass/. The install tree's examples/cpp flex_functor
# build (scripts/test_consumer.sh) fails when this list misses one.
#
# Used by cmake/install.cmake (the install tree, the flashcore::flex_kernels target) and by
# python/CMakeLists.txt (the wheel carries the same tree for flashcore.jit_score_mod).
set(FLASHCORE_KERNEL_HEADERS
  api/flex_functors.hpp
  api/run_flex.cuh
  api/run_flex_sm90.cuh
  common/block_walk.hpp
  common/flex_builtin.hpp
  common/flex_problem.hpp
  common/flex_scores.hpp
  common/flex_sequence.hpp
  common/head_dim.hpp
  common/launch.hpp
  common/launch_status.hpp
  common/online_softmax.hpp
  common/workspace_align.hpp
  common/problem.hpp
  common/pruning.hpp
  common/query_view.hpp
  common/score_scaling.hpp
  sm80/combine.cuh
  sm80/epilogue.hpp
  sm80/flex_kernel.cuh
  sm80/flex_params.hpp
  sm80/flex_view.hpp
  sm80/fwd_params.hpp
  sm80/fwd_plan.hpp
  sm80/kernel_traits.hpp
  sm80/mainloop.hpp
  sm80/split_kv.hpp
  sm80/tile_io.hpp
  sm90/dependent_launch.hpp
  sm90/epilogue.hpp
  sm90/flex_kernel.cuh
  sm90/flex_load.hpp
  sm90/flex_params.hpp
  sm90/flex_step.hpp
  sm90/flex_steps.hpp
  sm90/fwd_kernel.cuh
  sm90/fwd_params.hpp
  sm90/instantiations.hpp
  sm90/kernel_traits.hpp
  sm90/launch.cuh
  sm90/launch_args.hpp
  sm90/mainloop_load.hpp
  sm90/mainloop_mma.hpp
  sm90/named_barriers.hpp
  sm90/o_store.hpp
  sm90/sequence_view.hpp
  sm90/tile_scheduler.hpp
  sm90/tile_table.hpp
  sm90/tuned_tiles.hpp
  sm90/varlen_tiles.hpp
  sm90/wgmma.hpp
)
# Relative to the install prefix's include directory.
set(FLASHCORE_KERNELS_INCLUDE_SUBDIR "flashcore/kernels")
set(FLASHCORE_CUTLASS_INCLUDE_SUBDIR "flashcore/cutlass")

# Fails the configure when a listed header includes a header of src_dir that the list misses: the
# install tree would then break only where a program compiles that header (the sm90 kernels, which
# CI's consumer build for sm_80 does not compile, or the JIT on a GPU machine).
function(flashcore_check_kernel_headers src_dir)
  foreach(header IN LISTS FLASHCORE_KERNEL_HEADERS)
    file(STRINGS "${src_dir}/${header}" includes REGEX "^#include \"[^\"]+\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
      if(EXISTS "${src_dir}/${included}" AND NOT included IN_LIST FLASHCORE_KERNEL_HEADERS)
        message(FATAL_ERROR "${header} includes ${included}, which cmake/kernel_headers.cmake "
                            "does not list: the installed kernel headers would not compile")
      endif()
    endforeach()
  endforeach()
endfunction()

# Installs the kernel headers from src_dir (flashcore's src/) and the CuTe / CUTLASS headers from
# cutlass_include (with its license) under destination (an include directory), in component.
function(flashcore_install_kernel_headers src_dir cutlass_include destination component)
  flashcore_check_kernel_headers("${src_dir}")
  foreach(header IN LISTS FLASHCORE_KERNEL_HEADERS)
    get_filename_component(subdir "${header}" DIRECTORY)
    install(FILES "${src_dir}/${header}"
            DESTINATION "${destination}/${FLASHCORE_KERNELS_INCLUDE_SUBDIR}/${subdir}"
            COMPONENT ${component})
  endforeach()
  # Whole directories: CuTe's includes depend on the architecture and the compiler, so a list of
  # what one compile read would miss some on another.
  install(DIRECTORY "${cutlass_include}/cute" "${cutlass_include}/cutlass"
          DESTINATION "${destination}/${FLASHCORE_CUTLASS_INCLUDE_SUBDIR}" COMPONENT ${component})
  # The pip wheel scripts/install_deps.sh unpacked keeps CUTLASS's license in its dist-info.
  file(GLOB license "${cutlass_include}/../../../nvidia_cutlass-*.dist-info/licenses/LICENSE.txt")
  if(NOT license)
    message(FATAL_ERROR "CUTLASS's LICENSE.txt not found next to ${cutlass_include}")
  endif()
  install(FILES ${license} DESTINATION "${destination}/${FLASHCORE_CUTLASS_INCLUDE_SUBDIR}"
          COMPONENT ${component})
endfunction()
