// The library's sm90 flex kernels: flex_fwd_kernel (flex_kernel.cuh) with the built-in mods
// selected at run time, one per (dtype, head dim 64 / 128), compiled in sm90_flex_hd<D>.cu.
// flex_fwd.cu (the host side, no CuTe) reaches them only through launch_flex_head_dim.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/flex/builtin_mods.hpp"
#include "sm90/flex_params.hpp"
#include "sm90/launch_args.hpp"

namespace flashcore::sm90 {

using BuiltinFlexArgs = FlexArgs<flex::BuiltinMask, flex::BuiltinScoreMod>;

// The flex tile's rows and keys (flex_kernel.cuh, FlexTraits), for the host's grid and checks.
inline constexpr int kFlexTileRows = 128;
inline constexpr int kFlexTileKeys = 128;

// Whether a problem's BlockMask needs the paired walk (two 64-key blocks to a 128-key step,
// flex_load.hpp): the one place the launch and the functor path decide it.
inline bool needs_paired_walk(const flex::BlockMask& block_mask) {
  return block_mask.kv_num_blocks != nullptr && block_mask.kv_block_size % kFlexTileKeys != 0;
}

template <int kHeadDim>
cudaError_t launch_flex_head_dim(const LaunchArgs& in, const BuiltinFlexArgs& flex,
                                 cudaStream_t stream);
template <int kHeadDim>
int flex_smem_bytes_head_dim(bool bf16);

}  // namespace flashcore::sm90
