// The sm80 backward kernels for head dim 128 (fp16 and bf16), dense and flex; see bwd_launch.hpp.
#include "sm80/bwd_launch.cuh"

namespace flashcore::sm80 {
FLASHCORE_SM80_BWD_INSTANTIATE(128)
}  // namespace flashcore::sm80
