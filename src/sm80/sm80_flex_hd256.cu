// The sm80 flex kernels for head dim 256 (fp16 and bf16) with the built-in mods; see
// flex_launch.hpp.
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

template cudaError_t launch_flex_tile<FlexTile<__half, 256>>(const BuiltinFlexParams&,
                                                             cudaStream_t);
template cudaError_t launch_flex_tile<FlexTile<__nv_bfloat16, 256>>(const BuiltinFlexParams&,
                                                                    cudaStream_t);

}  // namespace flashcore::sm80
