// The sm90 forward kernels for head dim 256 (fp16 and bf16): the dense ones (see
// instantiations.hpp) and the flex ones with the built-in mods (see flex_launch.hpp). They share
// one translation unit because they share their tile shapes, and with them most of the compile: the
// first kernel's CuTe layouts, which the others reuse (docs/perf.md, session 45).
#include "sm90/flex_instantiate.cuh"
#include "sm90/launch.cuh"

namespace flashcore::sm90 {
FLASHCORE_SM90_INSTANTIATE(256)
FLASHCORE_SM90_FLEX_INSTANTIATE(256)
}  // namespace flashcore::sm90
