// The sm90 kernels for head dim 64 (fp16 and bf16); see instantiations.hpp.
#include "sm90/launch.cuh"

namespace flashcore::sm90 {
FLASHCORE_SM90_INSTANTIATE(64)
}  // namespace flashcore::sm90
