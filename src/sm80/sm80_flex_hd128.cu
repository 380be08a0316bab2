// The sm80 flex kernels for head dim 128 (fp16 and bf16) with the built-in mods; see
// flex_launch.hpp.
#include "sm80/flex_tile_launch.cuh"

namespace flashcore::sm80 {
FLASHCORE_SM80_FLEX_INSTANTIATE(128)
}  // namespace flashcore::sm80
