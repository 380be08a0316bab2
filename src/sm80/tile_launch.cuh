// The definition behind tile_launch.hpp, for the sm80_fwd_hd<D>.cu files only: a file that
// includes it compiles every kernel it instantiates.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/pruning.hpp"
#include "sm80/fwd_kernel.cuh"
#include "sm80/kernel_traits.hpp"
#include "sm80/tile_launch.hpp"

namespace flashcore::sm80 {

template <typename Traits>
cudaError_t launch_tile(const FwdParams& p, bool dependent, cudaStream_t stream) {
  constexpr DType kDType =
      std::is_same_v<typename Traits::Element, __half> ? DType::kFloat16 : DType::kBFloat16;
  // A dtype this build leaves out (common/pruning.hpp) compiles no kernel; sm80_fwd.cu's list
  // never calls it, as sm80_rejects says before any launch.
  if constexpr (detail::kernel_built(kDType, Traits::kHeadDim)) {
    return launch_fwd_kernel<Traits>(p, dependent, stream);
  } else {
    return cudaErrorInvalidDeviceFunction;
  }
}

}  // namespace flashcore::sm80

// Both tiles of head dim D for both dtypes; inside namespace flashcore::sm80.
#define FLASHCORE_SM80_INSTANTIATE(D)                                                           \
  template cudaError_t launch_tile<LargeTile<__half, D>>(const FwdParams&, bool, cudaStream_t); \
  template cudaError_t launch_tile<SmallTile<__half, D>>(const FwdParams&, bool, cudaStream_t); \
  template cudaError_t launch_tile<LargeTile<__nv_bfloat16, D>>(const FwdParams&, bool,         \
                                                                cudaStream_t);                  \
  template cudaError_t launch_tile<SmallTile<__nv_bfloat16, D>>(const FwdParams&, bool,         \
                                                                cudaStream_t);
