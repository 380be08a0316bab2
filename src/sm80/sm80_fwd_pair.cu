// Instantiations and launch of the cluster-pair tile (warpgroup_pair.hpp says why it has its own
// translation unit).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "sm80/fwd_kernel.cuh"
#include "sm80/kernel_traits.hpp"
#include "sm80/warpgroup_pair.hpp"

namespace flashcore::sm80 {

template <typename Element>
using PairTraits = KernelTraits<Element, 64, WarpgroupPairTileConfig<64>>;

template <typename Element>
cudaError_t warpgroup_pair_attributes(cudaFuncAttributes* attributes) {
  return cudaFuncGetAttributes(attributes, fwd_kernel<PairTraits<Element>>);
}

template <typename Element>
cudaError_t launch_warpgroup_pair(const FwdParams& p, bool dependent, cudaStream_t stream) {
  return launch_fwd_kernel<PairTraits<Element>>(p, dependent, stream);
}

template cudaError_t warpgroup_pair_attributes<__half>(cudaFuncAttributes*);
template cudaError_t warpgroup_pair_attributes<__nv_bfloat16>(cudaFuncAttributes*);
template cudaError_t launch_warpgroup_pair<__half>(const FwdParams&, bool, cudaStream_t);
template cudaError_t launch_warpgroup_pair<__nv_bfloat16>(const FwdParams&, bool, cudaStream_t);

}  // namespace flashcore::sm80
