// The sm90 backward kernels for head dim 256 (fp16 and bf16); see sm90_bwd.cu and
// bwd256_kernel.cuh.
#include "common/pruning.hpp"
#include "sm90/bwd256_kernel.cuh"

namespace flashcore::sm90 {

cudaError_t launch_backward_hd256(const sm80::BwdParams& p, const BwdTail& tail, bool bf16,
                                  cudaStream_t stream) {
  if (bf16) {
    if constexpr (detail::kernel_built(DType::kBFloat16, 256)) {
      return launch_backward256_softcap<cutlass::bfloat16_t>(p, tail, stream);
    }
  } else {
    if constexpr (detail::kernel_built(DType::kFloat16, 256)) {
      return launch_backward256_softcap<cutlass::half_t>(p, tail, stream);
    }
  }
  return cudaErrorInvalidDeviceFunction;
}

}  // namespace flashcore::sm90
