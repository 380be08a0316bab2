// flashcore::run with mask_mod and score_mod functors of the caller's own, fused into the sm80 flex
// kernel: include this from a .cu file and call run_flex<Element, kHeadDim>(params, mask, score).
// It compiles one kernel for the caller's (dtype, head dim, mods), and runs on any sm_80+ GPU.
//
// params is what flashcore::run takes, with the mods in the functors instead: causal, the window,
// softcap and flex.mask / flex.score_mod must stay off (AND a flex::WindowMod into the mask,
// compose a flex::SoftcapScore into the score_mod). flex.block_mask, flex.sinks and varlen work as
// for the built-ins. The functors follow flashcore/flex/mask_mods.hpp and score_mods.hpp: device
// pointers inside, optional with_seqlens / block_visibility members.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "api/flex_functors.hpp"
#include "common/launch_status.hpp"
#include "sm80/flex_kernel.cuh"
#include "sm80/flex_view.hpp"

namespace flashcore {

template <typename Element, int kHeadDim, typename Mask, typename ScoreMod>
Status run_flex(const AttentionParams& params, const Mask& mask, const ScoreMod& score_mod) {
  static_assert(std::is_same_v<Element, __half> || std::is_same_v<Element, __nv_bfloat16>,
                "Element is __half or __nv_bfloat16");
  using Traits = sm80::FlexTile<Element, kHeadDim>;
  const DType dtype = std::is_same_v<Element, __half> ? DType::kFloat16 : DType::kBFloat16;
  detail::Problem problem;
  if (Status s = detail::prepare_functor_flex(params, dtype, kHeadDim, {}, &problem); !s.ok()) {
    return s;
  }
  const auto fp = sm80::flex_view<Traits>(problem, mask, score_mod);
  return detail::launch_status(sm80::launch_flex_kernel<Traits>(fp, params.stream),
                               "sm80 flex_fwd_kernel (run_flex)");
}

}  // namespace flashcore
