// The sm90 kernels for head dim 224 (fp16 and bf16); see instantiations.hpp.
#include "sm90/launch.cuh"

namespace flashcore::sm90 {
FLASHCORE_SM90_INSTANTIATE(224)
}  // namespace flashcore::sm90
