// The sm80 backward kernels for head dim 256 (fp16 and bf16), both of its tiles (the 32-row one
// and, for GPUs with more shared memory per block, the 64-row one), dense and flex; see
// bwd_launch.hpp.
#include "sm80/bwd_launch.cuh"

namespace flashcore::sm80 {
FLASHCORE_SM80_BWD_INSTANTIATE(256)
FLASHCORE_SM80_BWD_INSTANTIATE_TILE(256, true)
}  // namespace flashcore::sm80
