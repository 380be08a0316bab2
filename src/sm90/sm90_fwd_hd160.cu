// The sm90 kernels for head dim 160 (fp16 and bf16); see instantiations.hpp.
#include "sm90/launch.cuh"

namespace flashcore::sm90 {
FLASHCORE_SM90_INSTANTIATE(160)
}  // namespace flashcore::sm90
