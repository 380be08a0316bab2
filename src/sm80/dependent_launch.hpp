// Programmatic dependent launch (PDL, sm_90+). A kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it in the
// stream still runs; wait_for_prior_grid() then blocks until that kernel has completed and its
// memory is visible, so every global read and write of ours must come after it (kernel parameters
// may be read before: they are the launch's own). allow_dependent_launch() lets the next kernel,
// if it too is launched that way, start once every CTA of this grid has run it: its launch and
// setup overlap our work instead of following it. Below sm_90 both compile to nothing, and the
// host never sets the attribute there (sm80_fwd.cu). Used by the small-grid tiles (fwd_kernel.cuh).
#pragma once

namespace flashcore::sm80 {

__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace flashcore::sm80
