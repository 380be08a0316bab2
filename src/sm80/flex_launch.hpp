// The library's flex kernels: flex_fwd_kernel (flex_kernel.cuh) with the built-in mods selected
// at run time, one per (dtype, head dim 64 / 128 / 256), compiled in sm80_flex_hd<D>.cu.
// flex_fwd.cu (the host side) reaches them only through launch_flex_tile.
#pragma once

#include <cuda_runtime.h>

#include "flashcore/flex/builtin_mods.hpp"
#include "sm80/flex_params.hpp"

namespace flashcore::sm80 {

using BuiltinFlexParams = FlexParams<flex::BuiltinMask, flex::BuiltinScoreMod>;

template <typename Traits>
cudaError_t launch_flex_tile(const BuiltinFlexParams& p, cudaStream_t stream);

}  // namespace flashcore::sm80
