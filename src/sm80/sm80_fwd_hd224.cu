// The sm80 mma.sync kernels for head dim 224 (both tiles, fp16 and bf16); see tile_launch.hpp.
#include "sm80/tile_launch.cuh"

namespace flashcore::sm80 {
FLASHCORE_SM80_INSTANTIATE(224)
}  // namespace flashcore::sm80
