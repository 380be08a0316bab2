// Programmatic dependent launch (PDL, sm_90+), as the GridDependency policy of the FA2-class
// schedule (src/sm80/kernel_traits.hpp). A kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it in the
// stream still runs; wait_for_prior_grid() then blocks until that kernel has completed and its
// memory is visible, so every global read and write of ours must come after it (kernel parameters
// may be read before: they are the launch's own). allow_dependent_launch() lets the next kernel,
// if it too is launched that way, start once every CTA of this grid has run it: its launch and
// setup overlap our work instead of following it. In the SASS (sm_90a) the two are a PREEXIT and
// an ACQBULK. Used by the small-grid tiles (small_grid/tile_table.hpp), which are launch-bound.
#pragma once

namespace flashcore::sm90 {

struct DependentLaunch {
  // The host may launch a kernel with this policy dependently (common/launch.hpp).
  static constexpr bool kWaitsForPriorGrid = true;

  __device__ __forceinline__ static void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  }

  __device__ __forceinline__ static void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
};

}  // namespace flashcore::sm90
