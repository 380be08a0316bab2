// Instantiations and launch of the cluster-pair tile (cta_pair_fwd.hpp says why it has its own
// translation unit).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "sm80/fwd_kernel.cuh"
#include "sm90/small_grid/cta_pair_fwd.hpp"
#include "sm90/small_grid/tile_table.hpp"

namespace flashcore::sm90::small_grid {

template <typename Element>
cudaError_t launch_cta_pair(const sm80::FwdParams& p, bool dependent, cudaStream_t stream) {
  return sm80::launch_fwd_kernel<CtaPairTraits<Element>>(p, dependent, stream);
}

template cudaError_t launch_cta_pair<__half>(const sm80::FwdParams&, bool, cudaStream_t);
template cudaError_t launch_cta_pair<__nv_bfloat16>(const sm80::FwdParams&, bool, cudaStream_t);

}  // namespace flashcore::sm90::small_grid
