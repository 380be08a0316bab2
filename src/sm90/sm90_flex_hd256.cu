// The sm90 flex kernels for head dim 256 (fp16 and bf16) with the built-in mods; see
// flex_launch.hpp.
#include "sm90/flex_instantiate.cuh"

namespace flashcore::sm90 {
FLASHCORE_SM90_FLEX_INSTANTIATE(256)
}  // namespace flashcore::sm90
