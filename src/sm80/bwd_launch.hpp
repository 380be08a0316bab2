// The sm80 backward's kernels are compiled one head dim per translation unit, sm80_bwd_hd<D>.cu,
// as the forward's (tile_launch.hpp); sm80_bwd.cu, whose instantiation list says which exist,
// reaches them only through launch_backward, declared here and defined in bwd_launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include "sm80/bwd_params.hpp"

namespace flashcore::sm80 {

// The three launches of one backward on stream, in order: bwd_preprocess (D, LSE), bwd_kernel
// (dK, dV, the dQ accumulators; its deterministic variant when asked) and bwd_convert (dQ). The
// workspace's dQ accumulators (and semaphores) must be zero. Returns the first launch's error.
template <typename Traits>
cudaError_t launch_backward(const BwdParams& p, bool deterministic, cudaStream_t stream);

// The same three launches with the flex backward (bwd_flex_kernel.cuh) in the middle: varlen
// batches and the built-in flex options. Instantiated for every tile launch_backward has.
template <typename Traits>
cudaError_t launch_flex_backward(const BuiltinBwdFlexParams& fp, cudaStream_t stream);

}  // namespace flashcore::sm80
