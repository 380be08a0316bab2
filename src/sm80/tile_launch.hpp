// The mma.sync tiles' kernels (LargeTile, SmallTile of kernel_traits.hpp) are compiled one head
// dim per translation unit, sm80_fwd_hd<D>.cu, so that they build in parallel: eight head dims,
// two dtypes and two tiles in the one file sm80_fwd.cu would be the longest compile of the
// build by far. sm80_fwd.cu (whose instantiation list says which exist) reaches them only through
// launch_tile, declared here and defined in tile_launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include "sm80/fwd_params.hpp"

namespace flashcore::sm80 {

// Launches fwd_kernel<Traits> on the grid p plans (fwd_kernel.cuh, launch_fwd_kernel).
template <typename Traits>
cudaError_t launch_tile(const FwdParams& p, bool dependent, cudaStream_t stream);

}  // namespace flashcore::sm80
