// The definition behind flex_launch.hpp, for the sm80_flex_hd<D>.cu files only: a file that
// includes it compiles every flex kernel it instantiates (as tile_launch.cuh for the dense ones).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/pruning.hpp"
#include "sm80/flex_kernel.cuh"
#include "sm80/flex_launch.hpp"

namespace flashcore::sm80 {

template <typename Traits>
cudaError_t launch_flex_tile(const BuiltinFlexParams& p, cudaStream_t stream) {
  constexpr DType kDType =
      std::is_same_v<typename Traits::Element, __half> ? DType::kFloat16 : DType::kBFloat16;
  // A dtype or head dim this build leaves out (common/pruning.hpp) compiles no kernel; flex_fwd.cu
  // never calls it, as its rejects() says before any launch.
  if constexpr (detail::kernel_built(kDType, Traits::kHeadDim)) {
    return launch_flex_kernel<Traits>(p, stream);
  } else {
    return cudaErrorInvalidDeviceFunction;
  }
}

}  // namespace flashcore::sm80

// The flex tile of head dim D for both dtypes; inside namespace flashcore::sm80.
#define FLASHCORE_SM80_FLEX_INSTANTIATE(D)                                                    \
  template cudaError_t launch_flex_tile<FlexTile<__half, D>>(const BuiltinFlexParams&,        \
                                                             cudaStream_t);                   \
  template cudaError_t launch_flex_tile<FlexTile<__nv_bfloat16, D>>(const BuiltinFlexParams&, \
                                                                    cudaStream_t);
