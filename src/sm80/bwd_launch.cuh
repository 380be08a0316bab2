// The definition behind bwd_launch.hpp, for the sm80_bwd_hd<D>.cu files only: a file that includes
// it compiles every kernel it instantiates.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/pruning.hpp"
#include "sm80/bwd_convert.cuh"
#include "sm80/bwd_flex_kernel.cuh"
#include "sm80/bwd_kernel.cuh"
#include "sm80/bwd_kernel_traits.hpp"
#include "sm80/bwd_launch.hpp"
#include "sm80/bwd_preprocess.cuh"

namespace flashcore::sm80 {

template <typename Traits>
cudaError_t launch_backward(const BwdParams& p, bool deterministic, cudaStream_t stream) {
  constexpr DType kDType =
      std::is_same_v<typename Traits::Element, __half> ? DType::kFloat16 : DType::kBFloat16;
  // A dtype this build leaves out (common/pruning.hpp) compiles no kernel; sm80_bwd.cu's list
  // never calls it, as its rejects() says before any launch.
  if constexpr (detail::kernel_built(kDType, Traits::kHeadDim)) {
    if (cudaError_t err = launch_bwd_preprocess<Traits>(p, stream); err != cudaSuccess) return err;
    const cudaError_t err = deterministic ? launch_bwd_kernel<Traits, true>(p, stream)
                                          : launch_bwd_kernel<Traits, false>(p, stream);
    if (err != cudaSuccess) return err;
    return launch_bwd_convert<Traits>(p, stream);
  } else {
    return cudaErrorInvalidDeviceFunction;
  }
}

template <typename Traits>
cudaError_t launch_flex_backward(const BuiltinBwdFlexParams& fp, cudaStream_t stream) {
  constexpr DType kDType =
      std::is_same_v<typename Traits::Element, __half> ? DType::kFloat16 : DType::kBFloat16;
  if constexpr (detail::kernel_built(kDType, Traits::kHeadDim)) {
    if (cudaError_t err = launch_bwd_preprocess<Traits>(fp.bwd, stream); err != cudaSuccess) {
      return err;
    }
    if (cudaError_t err = launch_bwd_flex_kernel<Traits>(fp, stream); err != cudaSuccess) {
      return err;
    }
    return launch_bwd_convert<Traits>(fp.bwd, stream);
  } else {
    return cudaErrorInvalidDeviceFunction;
  }
}

}  // namespace flashcore::sm80

// Both dtypes of head dim D's tile (its large-shared-memory tile when kLarge is true:
// bwd_kernel_traits.hpp), dense and flex: sm80_bwd.cu launches whichever the problem asks on the
// tile the device fits; inside namespace flashcore::sm80.
#define FLASHCORE_SM80_BWD_INSTANTIATE_TILE(D, kLarge)                                           \
  template cudaError_t launch_backward<BwdTraits<__half, D, kLarge>>(const BwdParams&, bool,     \
                                                                     cudaStream_t);              \
  template cudaError_t launch_backward<BwdTraits<__nv_bfloat16, D, kLarge>>(const BwdParams&,    \
                                                                            bool, cudaStream_t); \
  template cudaError_t launch_flex_backward<BwdTraits<__half, D, kLarge>>(                       \
      const BuiltinBwdFlexParams&, cudaStream_t);                                                \
  template cudaError_t launch_flex_backward<BwdTraits<__nv_bfloat16, D, kLarge>>(                \
      const BuiltinBwdFlexParams&, cudaStream_t);
#define FLASHCORE_SM80_BWD_INSTANTIATE(D) FLASHCORE_SM80_BWD_INSTANTIATE_TILE(D, false)
