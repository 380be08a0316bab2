// The library's sm90 flex kernels: flex_fwd_kernel (flex_kernel.cuh) with the built-in mods
// selected at run time, one per (dtype, head dim 64 / 128 / 256), compiled in sm90_fwd_hd<D>.cu.
// flex_fwd.cu (the host side, no CuTe) reaches them only through launch_flex_head_dim.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/flex/builtin_mods.hpp"
#include "sm90/flex_params.hpp"
#include "sm90/launch_args.hpp"

namespace flashcore::sm90 {

using BuiltinFlexArgs = FlexArgs<flex::BuiltinMask, flex::BuiltinScoreMod>;

template <int kHeadDim>
cudaError_t launch_flex_head_dim(const LaunchArgs& in, const BuiltinFlexArgs& flex,
                                 cudaStream_t stream);
template <int kHeadDim>
int flex_smem_bytes_head_dim(bool bf16);

}  // namespace flashcore::sm90
