// One head dim's sm90 flex kernels (both dtypes, pruned by FLASHCORE_DTYPES like the dense ones):
// included by sm90_fwd_hd<D>.cu (D = 64, 128, 256) only, next to the dense kernels.
#pragma once

#include <cutlass/numeric_types.h>

#include <type_traits>

#include "common/pruning.hpp"
#include "sm90/flex_kernel.cuh"
#include "sm90/flex_launch.hpp"

namespace flashcore::sm90 {

template <typename Element, int kHeadDim>
cudaError_t launch_flex_dtype(const LaunchArgs& in, const BuiltinFlexArgs& flex,
                              cudaStream_t stream) {
  constexpr DType kDType =
      std::is_same_v<Element, cutlass::bfloat16_t> ? DType::kBFloat16 : DType::kFloat16;
  if constexpr (!detail::kernel_built(kDType, kHeadDim)) {
    (void)in, (void)flex, (void)stream;
    return cudaErrorInvalidDeviceFunction;
  } else {
    using Traits = FlexTraits<Element, kHeadDim>;
    static_assert(Traits::kBlockM == kFlexTileRows && Traits::kBlockN == flex_tile_keys(kHeadDim));
    // Without a score_mod, a kernel that has none: the built-in one's per-element paths (ALiBi's
    // loads, softcap's division and tanh, which are calls) take registers from the whole loop,
    // and the O accumulator went to local memory in both paths when they shared one kernel.
    // BlockMasks of 64-key blocks under 128-key tiles: the paired kernels (two blocks to a step,
    // flex_load.hpp), so that the 128-key walk's kernels stay the code they were. 64-key tiles
    // take every BlockMask the backend accepts as whole tiles.
    const bool paired = needs_paired_walk(flex.block_mask, Traits::kBlockN);
    const auto launch = [&](const auto& args) {
      if constexpr (kHasPairedKernels<Traits>) {
        if (paired) return launch_flex_kernel<Traits, true>(in, args, stream);
      }
      return launch_flex_kernel<Traits, false>(in, args, stream);
    };
    if (flex.score_mod.is_identity()) {
      return launch(FlexArgs<flex::BuiltinMask, flex::NoScoreMod>{
          flex.mask, flex::NoScoreMod{}, flex.scale, flex.block_mask, flex.sinks, flex.cu_seqlens_q,
          flex.cu_seqlens_k, flex.merged});
    }
    return launch(flex);
  }
}

template <int kHeadDim>
cudaError_t launch_flex_head_dim(const LaunchArgs& in, const BuiltinFlexArgs& flex,
                                 cudaStream_t stream) {
  return in.bf16 ? launch_flex_dtype<cutlass::bfloat16_t, kHeadDim>(in, flex, stream)
                 : launch_flex_dtype<cutlass::half_t, kHeadDim>(in, flex, stream);
}

template <int kHeadDim>
int flex_smem_bytes_head_dim(bool bf16) {
  using Mask = flex::BuiltinMask;
  using ScoreMod = flex::BuiltinScoreMod;
  // The largest of the kernels' (the built-in score_mod's state is the larger, and the paired
  // kernels' step words).
  static_assert(sizeof(flex::NoScoreMod) <= sizeof(ScoreMod));
  using Bf16 = FlexTraits<cutlass::bfloat16_t, kHeadDim>;
  using Fp16 = FlexTraits<cutlass::half_t, kHeadDim>;
  return bf16 ? flex_smem_bytes<Bf16, Mask, ScoreMod, kHasPairedKernels<Bf16>>()
              : flex_smem_bytes<Fp16, Mask, ScoreMod, kHasPairedKernels<Fp16>>();
}

#define FLASHCORE_SM90_FLEX_INSTANTIATE(D)                                                \
  template cudaError_t launch_flex_head_dim<D>(const LaunchArgs&, const BuiltinFlexArgs&, \
                                               cudaStream_t);                             \
  template int flex_smem_bytes_head_dim<D>(bool bf16);

}  // namespace flashcore::sm90
