// The sm90 backward kernels for head dim 128 (fp16 and bf16); see sm90_bwd.cu.
#include "sm90/bwd_kernel.cuh"

namespace flashcore::sm90 {
FLASHCORE_SM90_BWD_INSTANTIATE(128)
}  // namespace flashcore::sm90
