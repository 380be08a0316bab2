// The sm90 kernels for head dim 256 (fp16 and bf16); see instantiations.hpp.
#include "sm90/launch.cuh"

namespace flashcore::sm90 {
FLASHCORE_SM90_INSTANTIATE(256)
}  // namespace flashcore::sm90
