// flashcore::run with mask_mod and score_mod functors of the caller's own, fused into the flex
// kernels: include this from a .cu file and call run_flex<Element, kHeadDim>(params, mask, score).
// It compiles the sm80 flex kernel for the caller's (dtype, head dim, mods), which runs on any
// sm_80+ GPU, and, where FLASHCORE_RUN_FLEX_SM90 is set (the file compiled for sm_90a among its
// architectures: CMake's flashcore::flex_kernels sets it for targets with 90a), the sm90 one too,
// and at head dims 64 and 128 its paired twin for BlockMasks of 64-key blocks (about twice the
// sm90 compile); on an H100 the sm90 kernel runs every problem it takes (BlockMasks of 64 keys or
// multiples of 128 at head dims 64 / 128, of any multiple of 64 at head dim 256, ...), the sm80
// one the rest, as for the built-in mods (prepare_functor_flex); the sm80 one splits the keys of
// small grids (decode) as for them too.
//
// params is what flashcore::run takes, with the mods in the functors instead: causal, the window,
// softcap and flex.mask / flex.score_mod must stay off (AND a flex::WindowMod into the mask,
// compose a flex::SoftcapScore into the score_mod). flex.block_mask, flex.sinks and varlen work as
// for the built-ins; backend auto, sm90 or sm80. The functors follow flashcore/flex/mask_mods.hpp
// and score_mods.hpp: device pointers inside, optional with_seqlens / block_visibility members.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "api/flex_functors.hpp"
#include "sm80/flex_kernel.cuh"
#include "sm80/flex_view.hpp"

#if FLASHCORE_RUN_FLEX_SM90
#include "api/run_flex_sm90.cuh"
#endif

namespace flashcore {
namespace detail {

// The kernels run_flex compiles for these functors: the sm80 one always, the sm90 one
// (FunctorKernels::sm90) and its paired twin (::sm90_paired) where FLASHCORE_RUN_FLEX_SM90 is set
// and they fit the functors.
template <typename Element, int kHeadDim, typename Mask, typename ScoreMod>
constexpr FunctorKernels run_flex_kernels() {
  FunctorKernels kernels;
  kernels.dtype = std::is_same_v<Element, __half> ? DType::kFloat16 : DType::kBFloat16;
  kernels.head_dim = kHeadDim;
#if FLASHCORE_RUN_FLEX_SM90
  kernels.sm90 = functor_sm90_fits<Element, kHeadDim, Mask, ScoreMod>();
  kernels.sm90_paired = functor_sm90_paired_fits<Element, kHeadDim, Mask, ScoreMod>();
#endif
  return kernels;
}

// Enqueues the sm80 flex kernel for (Element, kHeadDim, Mask, ScoreMod) and the plan's problem.
template <typename Element, int kHeadDim, typename Mask, typename ScoreMod>
cudaError_t launch_functor_sm80(const FunctorFlex& plan, const Mask& mask,
                                const ScoreMod& score_mod, cudaStream_t stream) {
  static_assert(std::is_same_v<Element, __half> || std::is_same_v<Element, __nv_bfloat16>,
                "Element is __half or __nv_bfloat16");
  using Traits = sm80::FlexTile<Element, kHeadDim>;
  auto fp = sm80::flex_view<Traits>(plan.problem, mask, score_mod);
  sm80::use_split_partials(fp.fwd, plan.sm80_splits, plan.sm80_workspace);
  return sm80::launch_flex_kernel<Traits>(fp, stream);
}

}  // namespace detail

template <typename Element, int kHeadDim, typename Mask, typename ScoreMod>
Status run_flex(const AttentionParams& params, const Mask& mask, const ScoreMod& score_mod,
                RunInfo* info = nullptr) {
  static constexpr detail::FunctorKernels kKernels =
      detail::run_flex_kernels<Element, kHeadDim, Mask, ScoreMod>();
  detail::FunctorFlex plan;
  if (Status s = detail::prepare_functor_flex(params, kKernels, {}, &plan); !s.ok()) {
    return s;
  }
  struct Mods {
    const Mask* mask;
    const ScoreMod* score_mod;
  };
  const Mods mods{&mask, &score_mod};
  const auto launch = [](const detail::FunctorFlex* chosen, const void* context,
                         cudaStream_t stream) -> int {
    const Mods& m = *static_cast<const Mods*>(context);
#if FLASHCORE_RUN_FLEX_SM90
    if constexpr (kKernels.sm90) {
      if (chosen->sm90) {
        return detail::launch_functor_sm90<Element, kHeadDim>(*chosen, *m.mask, *m.score_mod,
                                                              stream);
      }
    }
#endif
    return detail::launch_functor_sm80<Element, kHeadDim>(*chosen, *m.mask, *m.score_mod, stream);
  };
  return detail::launch_functor_flex(&plan, launch, &mods, info);
}

}  // namespace flashcore
